// Real servers for the tests: redis-server on a free port, with the module
// or without it (script mode), and a 3-primary Redis Cluster likewise, each
// stopped afterwards.

import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const MODULE = process.env.RATELIMIT_MODULE ?? resolve(import.meta.dirname, '../../../../target/release/libredis_ratelimit.so');
const REDIS_SERVER = process.env.REDIS_SERVER ?? 'redis-server';
const REDIS_CLI = process.env.REDIS_CLI ?? 'redis-cli';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function portIsFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once('error', () => done(false));
    server.listen(port, '127.0.0.1', () => server.close(() => done(true)));
  });
}

/** A free port whose cluster bus port (+10000) is free too. */
async function freePort(): Promise<number> {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 35000);
    if ((await portIsFree(port)) && (await portIsFree(port + 10000))) return port;
  }
}

/** Whether the server answers a PING (within `withinMs`, when given). */
function answersPing(port: number, withinMs?: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(port, '127.0.0.1');
    const answer = (answered: boolean) => {
      socket.destroy();
      done(answered);
    };
    socket.once('error', () => answer(false));
    socket.once('connect', () => {
      socket.write('PING\r\n');
      if (withinMs !== undefined) setTimeout(() => answer(false), withinMs);
    });
    socket.once('data', (data) => answer(data.toString().startsWith('+PONG')));
  });
}

/** Waits until `done()` holds, checking every 50 ms; throws naming `what` after `ms`. */
export async function until(what: string, done: () => Promise<boolean>, ms = 15_000): Promise<void> {
  for (const end = performance.now() + ms; performance.now() < end; await sleep(50)) {
    if (await done()) return;
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** One redis-server process, with the module loaded unless told otherwise. */
export class RedisServer {
  private child: ChildProcess | undefined;

  private constructor(readonly port: number, private readonly dir: string, private readonly extra: string[], public withModule: boolean) {}

  static async start(extra: string[] = [], withModule = true): Promise<RedisServer> {
    const server = new RedisServer(await freePort(), mkdtempSync(join(tmpdir(), 'ratelimit-node-')), extra, withModule);
    await server.run();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts the process (again, after kill(), on the same port; with or without the module as `withModule` says then). */
  async run(): Promise<void> {
    mkdirSync(this.dir, { recursive: true });
    const module = this.withModule ? ['--loadmodule', MODULE] : [];
    this.child = spawn(
      REDIS_SERVER,
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, ...module, ...this.extra],
      { stdio: 'ignore' },
    );
    for (let i = 0; i < 400; i++) {
      if (await answersPing(this.port)) return;
      await sleep(25);
    }
    this.child.kill('SIGKILL');
    throw new Error(`redis-server ${module.join(' ')} did not start on ${this.port}`);
  }

  /** redis-cli against this server, for setting up and checking state. */
  async cli(...args: string[]): Promise<string> {
    const { stdout } = await promisify(execFile)(REDIS_CLI, ['-p', String(this.port), ...args]);
    return stdout.trim();
  }

  /**
   * Fixed windows are aligned to the Unix epoch: a test that counts a fixed
   * window's units with the server's clock starts only once the current
   * `windowS` window has at least `neededS` seconds left, so it never
   * straddles an edge.
   */
  async waitForWindowWith(windowS: number, neededS = 20): Promise<void> {
    const [seconds, micros] = (await this.cli('time')).split('\n').map(Number);
    const left = windowS - ((seconds % windowS) + micros / 1e6);
    if (left < neededS) await new Promise((r) => setTimeout(r, left * 1000 + 10));
  }

  /** Stops the process where it is (SIGSTOP): connections stay open, nothing is read or answered until resume(). */
  pause() {
    this.child?.kill('SIGSTOP');
  }

  resume() {
    this.child?.kill('SIGCONT');
  }

  /**
   * A script from another client that keeps Redis busy for `ms` (under
   * the busy-reply threshold of 5 s, so other clients' commands wait
   * rather than get BUSY); resolves once it has started.
   */
  async busyFor(ms: number): Promise<{ done: Promise<string> }> {
    const script = "local t = redis.call('TIME') local from = t[1] * 1e6 + t[2] " +
      "repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - from >= tonumber(ARGV[1]) * 1000 return 'done'";
    const done = this.cli('eval', script, '0', String(ms));
    // Started once a PING gets no answer in 200 ms (redis-cli itself may take a while to start on a loaded machine).
    for (const until = performance.now() + 10_000; performance.now() < until; await sleep(10)) {
      if (!(await answersPing(this.port, 200))) return { done };
    }
    await done; // never leave it running into the next test
    throw new Error('the busy script did not start');
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Whether a CLUSTER NODES slot field (`5461`, `0-5460`; `[...]` migrations aside) holds `slot`. */
function covers(range: string, slot: number): boolean {
  if (range.startsWith('[')) return false;
  const [start, end = start] = range.split('-').map(Number);
  return start <= slot && slot <= end;
}

/** Three primaries, no replicas, all slots covered, the module on each unless told otherwise. */
export class RedisCluster {
  private constructor(readonly nodes: RedisServer[]) {}

  static async start(withModule = true): Promise<RedisCluster> {
    const nodes: RedisServer[] = [];
    for (let i = 0; i < 3; i++) {
      nodes.push(await RedisServer.start(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000'], withModule));
    }
    const cluster = new RedisCluster(nodes);
    await promisify(execFile)(REDIS_CLI, ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    for (const node of nodes) {
      for (let i = 0; !(await node.cli('cluster', 'info')).includes('cluster_state:ok'); i++) {
        if (i > 400) throw new Error('the cluster did not come up');
        await sleep(25);
      }
    }
    return cluster;
  }

  get rootNodes() {
    return this.nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  }

  /** redis-cli in cluster mode (it follows MOVED), for checking state. */
  async cli(...args: string[]): Promise<string> {
    const { stdout } = await promisify(execFile)(REDIS_CLI, ['-c', '-p', String(this.nodes[0].port), ...args]);
    return stdout.trim();
  }

  /** The node serving `key`'s slot now: the one that does not answer MOVED. */
  async ownerOf(key: string): Promise<RedisServer> {
    for (const node of this.nodes) {
      if (!(await node.cli('type', key)).startsWith('MOVED')) return node;
    }
    throw new Error(`no node serves ${key}`);
  }

  /** Moves `key`'s slot, with its keys, to another node, as resharding does. */
  async moveSlotOf(key: string): Promise<void> {
    const slot = await this.nodes[0].cli('cluster', 'keyslot', key);
    const source = await this.ownerOf(key);
    const target = this.nodes.find((n) => n !== source)!;
    const sourceId = await source.cli('cluster', 'myid');
    const targetId = await target.cli('cluster', 'myid');
    await target.cli('cluster', 'setslot', slot, 'importing', sourceId);
    await source.cli('cluster', 'setslot', slot, 'migrating', targetId);
    for (;;) {
      const keys = (await source.cli('cluster', 'getkeysinslot', slot, '100')).split('\n').filter(Boolean);
      if (keys.length === 0) break;
      await source.cli('migrate', '127.0.0.1', String(target.port), '', '0', '5000', 'keys', ...keys);
    }
    for (const node of this.nodes) await node.cli('cluster', 'setslot', slot, 'node', targetId);
    // A gossip message the source sent before its SETSLOT can still hand the
    // slot back for a moment: wait until every node names the target, twice
    // a cluster-bus beat apart.
    for (let round = 0; round < 2; round++) {
      for (let tries = 0; !(await this.allName(slot, target.port)); tries++) {
        if (tries === 150) throw new Error(`the nodes do not agree that ${target.port} serves slot ${slot}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Whether every node's CLUSTER NODES says the primary on `port` serves `slot`. */
  private async allName(slot: string, port: number): Promise<boolean> {
    const views = await Promise.all(this.nodes.map((node) => node.cli('cluster', 'nodes')));
    return views.every((nodes) =>
      nodes.split('\n').some((line) => {
        const [, address, flags, , , , , , ...slots] = line.split(' ');
        return address.startsWith(`127.0.0.1:${port}@`) && flags.includes('master') && slots.some((range) => covers(range, Number(slot)));
      }),
    );
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}
