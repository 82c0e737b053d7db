// `make example`'s app (examples/express/app.mjs, the package from this
// build) on a real redis-server with the module: the curl loop the
// repository's README shows, and what the README shows it answers, line
// for line ("..." in the README stands for the responses left out; the
// per-ip limit's t counts down to the clock's minute, so any t there).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';

import { RedisServer } from './servers.js';

const root = resolve(import.meta.dirname, '../../../..');
const packageDir = resolve(import.meta.dirname, '../..');

/** The README's session: the command and what it prints. */
function readmeSession(): { command: string; shown: string[] } {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const [, session] = /^`make example` [\s\S]*?^```\n([\s\S]*?)^```$/m.exec(readme) ?? [];
  assert.ok(session, 'the README shows a make example session');
  const [command, ...shown] = session.trimEnd().split('\n');
  return { command, shown };
}

/** What `curl -si <url> | grep -iE '^(HTTP|ratelimit:|retry)'` prints: the status line and those header lines, as sent. */
function curlLines(url: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      const lines = [`HTTP/${res.httpVersion} ${res.statusCode} ${res.statusMessage}`];
      for (let i = 0; i < res.rawHeaders.length; i += 2) {
        if (/^(ratelimit:|retry)/i.test(`${res.rawHeaders[i]}:`)) lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
      }
      res.resume();
      res.once('end', () => resolve(lines));
    }).once('error', reject);
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

let server: RedisServer;
before(async () => {
  server = await RedisServer.start();
});
after(async () => {
  await server.stop();
});

test('make example: the README\'s curl loop against examples/express answers what the README shows', async () => {
  const { command, shown } = readmeSession();
  const loop = /^\$ for i in ((?:\d+ )+)?\d+; do curl -si (http:\/\/127\.0\.0\.1:3000\/) \| grep -iE '\^\(HTTP\|ratelimit:\|retry\)'; done$/.exec(command);
  assert.ok(loop, command);
  const times = command.match(/for i in ([\d ]+);/)![1].trim().split(' ').length;

  const dir = join(packageDir, 'build', 'example');
  mkdirSync(dir, { recursive: true });
  const app = readFileSync(join(root, 'examples', 'express', 'app.mjs'), 'utf8');
  const here = JSON.stringify(pathToFileURL(join(packageDir, 'build', 'src', 'index.js')).href);
  writeFileSync(join(dir, 'app.mjs'), app.replace("'redis-ratelimit-client'", here));
  const port = await freePort();
  const child = spawn(process.execPath, [join(dir, 'app.mjs')], { env: { ...process.env, REDIS_URL: server.url, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    const printed = await new Promise<string>((resolve, reject) => {
      let stdout = '';
      child.stdout!.on('data', (data) => {
        stdout += data;
        if (stdout.includes('curl -si -H')) resolve(stdout);
      });
      child.once('exit', (code) => reject(new Error(`the example exited (${code})`)));
    });
    // The app suggests the README's loop itself.
    assert.ok(printed.includes(command.slice(2).replace(':3000', `:${port}`)), printed);
    const answered: string[][] = [];
    for (let i = 0; i < times; i++) answered.push(await curlLines(`http://127.0.0.1:${port}/`));
    // "..." stands for the responses between the first and the last two; per-ip's t is the clock's.
    const anyT = (line: string) => line.replace(/("per-ip";r=\d+);t=\d+/, '$1;t=N');
    const elided = shown.indexOf('...');
    const head = shown.slice(0, elided);
    const tail = shown.slice(elided + 1);
    const all = answered.flat();
    assert.deepEqual(all.slice(0, head.length).map(anyT), head.map(anyT));
    assert.deepEqual(all.slice(all.length - tail.length).map(anyT), tail.map(anyT));
    assert.deepEqual(answered.map((lines) => lines[0]), [...Array(times - 1).fill('HTTP/1.1 200 OK'), 'HTTP/1.1 429 Too Many Requests']);
  } finally {
    child.kill();
  }
});
