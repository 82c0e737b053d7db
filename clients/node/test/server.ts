// A real redis-server with the module loaded, on a free port, for the tests.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const MODULE = process.env.RATELIMIT_MODULE ?? resolve(import.meta.dirname, '../../../../target/release/libredis_ratelimit.so');

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => done(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

function answersPing(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      socket.destroy();
      done(data.toString().startsWith('+PONG'));
    });
  });
}

export class RedisServer {
  private constructor(
    readonly port: number,
    private readonly child: ChildProcess,
    private readonly dir: string,
  ) {}

  static async start(): Promise<RedisServer> {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'ratelimit-node-'));
    const child = spawn(
      process.env.REDIS_SERVER ?? 'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--loadmodule', MODULE],
      { stdio: 'ignore' },
    );
    for (let i = 0; i < 200; i++) {
      if (await answersPing(port)) {
        return new RedisServer(port, child, dir);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    child.kill('SIGKILL');
    throw new Error(`redis-server with ${MODULE} did not start`);
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((r) => this.child.once('exit', r));
      this.child.kill('SIGKILL');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
