// Every TypeScript block of README.md, extracted as it is written: all of
// them compiled together by strict TypeScript against the package's types
// (with @types/express: `req.rateLimit` must be on Express's Request), and
// each run against a real redis-server (with the module, and without it,
// where the default `auto` mode runs the script), also with Redis stopped.
// The names a block leaves to the reader (authenticate, search, job...) come
// from stand-ins here. The sh block is the install that package.test.ts
// does; the headers block is sample output.

import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';

import { createClient } from 'redis';
import ts from 'typescript';

import { createLimiter } from '../src/index.js';
import { MODES } from './modes.js';
import { RedisServer } from './servers.js';

const packageDir = resolve(import.meta.dirname, '../..');
const dir = join(packageDir, 'build', 'readme');
const blocks = [...readFileSync(join(packageDir, 'README.md'), 'utf8').matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
const block = (needle: string) => {
  const found = blocks.filter((b) => b.includes(needle));
  assert.equal(found.length, 1, needle);
  return found[0];
};
const EXPRESS = block("from 'express'");
const FASTIFY = block("from 'fastify'");
const FASTIFY_TYPES = block("declare module 'fastify'");
const CHECK = block('callModel');
const SLOTS = block("algorithm: 'concurrency'");
const SCRIPT = block("mode: 'script'");

// The root README's quickstart, the one TypeScript block there.
const rootBlocks = [...readFileSync(join(packageDir, '..', '..', 'README.md'), 'utf8').matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);

/** What the README leaves to the reader: types for the compiler, values for the runs. */
const STAND_INS: Record<string, { type: string }> = {
  authenticate: { type: 'declare function authenticate(req: any, res: any, next: () => void): void;' },
  search: { type: 'declare function search(req: any, res: any): void;' },
  health: { type: 'declare function health(): Promise<object>;' },
  job: { type: 'declare const job: { tenant: string; maxTokens: number };' },
  callModel: { type: 'declare function callModel(job: { tenant: string; maxTokens: number }): Promise<number>;' },
  runExport: { type: 'declare function runExport(job: { tenant: string; maxTokens: number }): Promise<void>;' },
  redis: { type: "declare const redis: import('redis').RedisClientType;" },
};

const declared = (code: string) => new Set([...code.matchAll(/^(?:const|let) (\w+)/gm)].map((m) => m[1]));
const needs = (code: string) => Object.keys(STAND_INS).filter((name) => new RegExp(`\\b${name}\\b`).test(code) && !declared(code).has(name));

let counter = 0;

/**
 * Runs a block as the body of a function of the stand-ins (its imports
 * hoisted, the package imported from this build). Gives back the names it
 * declared, as far as it got, and what it threw.
 */
async function run(code: string, stands: Record<string, unknown>): Promise<{ out: Record<string, any>; error?: Error }> {
  const lines = code.split('\n');
  const here = JSON.stringify(pathToFileURL(join(packageDir, 'build', 'src', 'index.js')).href);
  const imports = lines.filter((l) => l.startsWith('import ')).map((l) => l.replace("'redis-ratelimit-client'", here));
  const body = lines.filter((l) => !l.startsWith('import ')).join('\n').replace(/^(const|let) (\w+) = /gm, '$1 $2 = out.$2 = ');
  const source = `${imports.join('\n')}\nexport async function main({ ${needs(code).join(', ')} }: any, out: any) {\n${body}\n}\n`;
  const js = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
  const file = join(dir, `run-${counter++}.mjs`);
  writeFileSync(file, js);
  const out: Record<string, any> = {};
  try {
    await (await import(pathToFileURL(file).href)).main(stands, out);
    return { out };
  } catch (error) {
    return { out, error: error as Error };
  }
}

async function listen(app: any): Promise<{ url: string; close(): void }> {
  const http = app.listen(0);
  await new Promise((r) => http.once('listening', r));
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, close: () => http.close() };
}

before(() => {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
});

test('the README has these six TypeScript blocks (the repository\'s README one), and strict TypeScript compiles each as written, exactOptionalPropertyTypes on', () => {
  assert.equal(blocks.length, 6);
  assert.equal(rootBlocks.length, 1);
  const files = [...blocks, ...rootBlocks].map((code, i) => {
    const file = join(dir, `block-${i}.ts`);
    // The Fastify request's type declaration goes with the Fastify app that reads it.
    const text = code === FASTIFY ? `${code}\n${FASTIFY_TYPES}` : code;
    writeFileSync(file, `${needs(text).map((n) => STAND_INS[n].type).join('\n')}\n${text}\nexport {};\n`);
    return file;
  });
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true, exactOptionalPropertyTypes: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', lib: ['ES2022', 'DOM'], types: ['node'], noEmit: true,
      skipLibCheck: true, typeRoots: [join(packageDir, 'node_modules', '@types')],
      paths: { 'redis-ratelimit-client': [join(packageDir, 'src', 'index.ts')] },
    },
    files,
  }));
  try {
    execFileSync(process.execPath, [join(packageDir, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { encoding: 'utf8', stdio: 'pipe' });
  } catch (error) {
    assert.fail((error as { stdout: string }).stdout);
  }
});

/**
 * The blocks that make a Redis client, each run as an app of its own in a
 * child process (its imports hoisted, the package from this build; `stands`
 * is code for the names it leaves to the reader; the root quickstart's
 * address and port swapped for the test's), listening on a free port.
 */
const APPS: { name: string; code: () => string; stands: string; path: string; listen: string }[] = [
  {
    name: 'clients/node/README.md, Express',
    code: () => EXPRESS,
    stands: 'const authenticate = (_req, _res, next) => next(); const search = (_req, res) => res.json({});',
    path: '/things',
    listen: "const server = app.listen(0, '127.0.0.1', () => console.log(`PORT ${server.address().port}`));",
  },
  {
    name: 'clients/node/README.md, Fastify',
    code: () => FASTIFY,
    stands: 'const search = async () => ({}); const health = async () => ({});',
    path: '/search',
    listen: "await app.listen({ port: 0, host: '127.0.0.1' }); console.log(`PORT ${app.server.address().port}`);",
  },
  {
    name: 'README.md (the repository\'s), Express',
    code: () => {
      assert.equal(rootBlocks.length, 1);
      const [quickstart] = rootBlocks;
      assert.ok(quickstart.includes("'redis://127.0.0.1:6379'") && /^app\.listen\(3000\);$/m.test(quickstart));
      return quickstart.replace("'redis://127.0.0.1:6379'", 'process.env.REDIS_URL').replace(/^app\.listen\(3000\);$/m, '');
    },
    stands: 'const authenticate = (_req, _res, next) => next();',
    path: '/',
    listen: "const server = app.listen(0, '127.0.0.1', () => console.log(`PORT ${server.address().port}`));",
  },
];

/** Starts a block's app; resolves with its URL once it listens. */
async function startApp(app: (typeof APPS)[number], redisUrl: string): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const lines = app.code().split('\n');
  const here = JSON.stringify(pathToFileURL(join(packageDir, 'build', 'src', 'index.js')).href);
  const imports = lines.filter((l) => l.startsWith('import ')).map((l) => l.replace("'redis-ratelimit-client'", here));
  const body = lines.filter((l) => !l.startsWith('import ')).join('\n');
  const source = `${imports.join('\n')}\n${app.stands}\n${body}\n${app.listen}\n`;
  const file = join(dir, `app-${counter++}.mjs`);
  writeFileSync(file, ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText);
  const child = spawn(process.execPath, [file], { env: { ...process.env, REDIS_URL: redisUrl }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (data) => (stderr += data));
  const url = await new Promise<string>((resolve, reject) => {
    let stdout = '';
    child.stdout!.on('data', (data) => {
      stdout += data;
      const port = /PORT (\d+)/.exec(stdout)?.[1];
      if (port) resolve(`http://127.0.0.1:${port}`);
    });
    child.once('exit', (code) => reject(new Error(`${app.name} exited (${code}): ${stderr}`)));
  });
  return { child, url, stderr: () => stderr };
}

describe('README blocks that make a Redis client handle its errors: the app runs on with Redis stopped', () => {
  let server: RedisServer;
  before(async () => {
    server = await RedisServer.start();
  });
  after(async () => {
    await server.stop();
  });

  for (const app of APPS) {
    test(app.name, async () => {
      const { child, url, stderr } = await startApp(app, server.url);
      try {
        assert.equal((await fetch(`${url}${app.path}`)).status, 200);
        await server.kill();
        // The client's reconnects fail for 2 s (each an 'error' event): requests still pass (failing open), the process lives.
        for (let i = 0; i < 4; i++) {
          await sleep(500);
          const res = await fetch(`${url}${app.path}`);
          assert.deepEqual([res.status, res.headers.get('ratelimit')], [200, null]);
        }
        assert.equal(child.exitCode, null, stderr());
        assert.doesNotMatch(stderr(), /Unhandled|ERR_UNHANDLED_ERROR/);
      } finally {
        child.kill();
        await server.run();
      }
    });
  }
});

for (const { mode, withModule } of MODES) {
  describe(`README blocks run on a server ${withModule ? 'with' : 'without'} the module (mode ${mode} by auto)`, () => {
    let server: RedisServer;
    let redis: ReturnType<typeof createClient>;
    const quiet = console.warn;

    before(async () => {
      server = await RedisServer.start([], withModule);
      process.env.REDIS_URL = server.url;
      redis = createClient({ url: server.url });
      redis.on('error', () => {});
      await redis.connect();
      console.warn = () => {}; // the blocks' "Redis unavailable" lines
    });
    after(async () => {
      console.warn = quiet;
      redis.destroy();
      await server.stop();
    });

    test('Express: the app-wide limits, the route limit checked with them, and /things with Redis stopped', async () => {
      await server.cli('flushall');
      const stands = {
        authenticate: (req: any, _res: any, next: () => void) => {
          if (req.get('x-user')) req.user = { id: req.get('x-user') };
          next();
        },
        search: (_req: any, res: any) => res.json({ results: [] }),
      };
      const { out: { app, redis: own, limiter }, error } = await run(EXPRESS, stands);
      assert.equal(error, undefined);
      const http = await listen(app);
      try {
        const things = await fetch(`${http.url}/things`, { headers: { 'x-user': 'ada' } });
        assert.equal(things.status, 200);
        assert.deepEqual(await things.json(), { left: 99 });
        assert.match(things.headers.get('ratelimit') ?? '', /^"per-user";r=99;t=1, "per-user-daily";r=4999;t=\d+, "per-ip";r=299;t=\d+$/);
        const statuses = [];
        for (let i = 0; i < 11; i++) statuses.push((await fetch(`${http.url}/search`, { method: 'POST', headers: { 'x-user': 'bob' } })).status);
        assert.deepEqual(statuses, [...Array(10).fill(200), 429]);
        assert.equal(await server.cli('type', 'ratelimit:{user:bob}:search'), mode === 'module' ? 'ratelimit' : 'string');
        await server.kill();
        const down = await fetch(`${http.url}/things`, { headers: { 'x-user': 'ada' } });
        assert.equal(down.status, 200); // failing open: no decision, no 500
        assert.deepEqual(await down.json(), { left: null });
        assert.equal(down.headers.get('ratelimit'), null);
      } finally {
        http.close();
        limiter.limiter.close();
        own.destroy();
        await server.run();
      }
    });

    test('Fastify: the plugin, a route limit, a route without limits', async () => {
      await server.cli('flushall');
      const stands = { search: async () => ({ results: [] }), health: async () => ({ ok: true }) };
      const { out: { app, redis: own }, error } = await run(FASTIFY, stands);
      assert.equal(error, undefined);
      await app.listen({ port: 0, host: '127.0.0.1' });
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      try {
        const statuses = [];
        for (let i = 0; i < 11; i++) statuses.push((await fetch(`${url}/search`)).status);
        assert.deepEqual(statuses, [...Array(10).fill(200), 429]);
        const health = await fetch(`${url}/health`);
        assert.equal(health.status, 200);
        assert.equal(health.headers.get('ratelimit'), null);
        assert.deepEqual(await health.json(), { ok: true });
      } finally {
        await app.close();
        own.disconnect();
      }
    });

    test('check(): the refund gives back unused tokens only, so the 60 a minute binds', async () => {
      await server.cli('flushall');
      const job = { tenant: 'acme', maxTokens: 1000 };
      const stands = { redis, job, callModel: async () => 300 };
      // tpm is a sliding window of 60 s (aligned to the clock's minutes): a run
      // that crossed a minute would see the last minute's tokens weighted down.
      const intoMinute = Date.now() % 60_000;
      if (intoMinute > 55_000) await sleep(60_000 - intoMinute + 20);
      // rpm refills one a second while this runs: it binds at 60 plus what came back.
      const started = performance.now();
      let ran = 0;
      let denial: string | undefined;
      while (denial === undefined && ran < 100) {
        const { out, error } = await run(CHECK, stands);
        out.tokens.close();
        if (error) denial = error.message.replace(/\d+ ms/, 'N ms');
        else ran++;
      }
      const refilled = Math.ceil((performance.now() - started) / 1000);
      assert.equal(denial, 'retry in N ms');
      assert.ok(ran >= 60 && ran <= 60 + refilled, `${ran} ran in ${refilled} s`);
      // Each that ran kept the 300 tokens it used of the 1000 it reserved.
      const peek = createLimiter({ redis, key: () => 'tenant:acme', limits: { name: 'tpm', algorithm: 'slidingwindow', limit: 100_000, window: 60, cost: 0 } });
      const decision = await peek.check({});
      peek.close();
      assert.equal(decision?.limits[0].remaining, 100_000 - ran * 300);
    });

    test('check() with a concurrency limit: two exports at once, the third refused, both slots back after release()', async () => {
      await server.cli('flushall');
      let open = () => {};
      const gate = new Promise<void>((resolve) => (open = resolve));
      let running = 0;
      const stands = { redis, job: { tenant: 'acme', maxTokens: 0 }, runExport: async () => void (running++, await gate) };
      const runs = [run(SLOTS, stands), run(SLOTS, stands)];
      for (let i = 0; running < 2; i++) {
        assert.ok(i < 400, `${running} exports started`);
        await new Promise((r) => setTimeout(r, 5));
      }
      const third = await run(SLOTS, stands);
      third.out.exportSlots.close();
      assert.match(String(third.error?.message), /^2 exports running; retry in \d+ ms at most$/);
      assert.equal(running, 2);
      assert.equal(await server.cli('exists', 'ratelimit:{tenant:acme}:exports'), '1');
      open();
      for (const { out, error } of await Promise.all(runs)) {
        out.exportSlots.close();
        assert.equal(error, undefined);
        assert.equal(out.slot.limits[0].leaseId > 0, true);
      }
      assert.equal(await server.cli('exists', 'ratelimit:{tenant:acme}:exports'), '0'); // released: the last release deletes the key
    });

    test('check() with Redis stopped: null, and the block runs on', async () => {
      await server.kill();
      try {
        const { out, error } = await run(CHECK, { redis, job: { tenant: 'acme', maxTokens: 10 }, callModel: async () => 1 });
        out.tokens.close();
        assert.equal(error, undefined);
        assert.equal(out.decision, null);
      } finally {
        await server.run();
      }
    });

    test(`script mode as the README sets it${withModule ? ', on a server that has the module too' : ''}`, async () => {
      await server.cli('flushall');
      const { out: { limiter }, error } = await run(SCRIPT, { redis });
      assert.equal(error, undefined);
      const decision = await limiter.limiter.check({ ip: '203.0.113.9' });
      limiter.limiter.close();
      assert.equal(decision.limits[0].remaining, 59);
      assert.equal(await server.cli('type', decision.limits[0].key), 'string'); // the script's plain string
    });
  });
}
