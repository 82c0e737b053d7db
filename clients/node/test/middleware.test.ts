// The Express middleware on a real HTTP server against a real Redis with
// the module: exact headers and bodies, keys, routes, and Redis going away.

import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';

import express from 'express';
import { createClient } from 'redis';

import { byHeader, byUser, rateLimit, type MiddlewareOptions } from '../src/index.js';
import { RedisServer } from './server.js';

async function withApp(
  configure: (redis: ReturnType<typeof createClient>) => Partial<MiddlewareOptions>,
  body: (get: (path: string, headers?: Record<string, string>) => Promise<Response>, server: RedisServer) => Promise<void>,
) {
  const server = await RedisServer.start();
  const redis = createClient({ url: server.url, disableOfflineQueue: true, socket: { reconnectStrategy: 50 } });
  redis.on('error', () => {});
  await redis.connect();
  const app = express();
  // A stand-in for auth middleware: `x-user` becomes `req.user`.
  app.use((req, _res, next) => {
    const id = req.get('x-user');
    if (id) Object.assign(req, { user: { id } });
    next();
  });
  const options = { redis, limit: { limit: 3, rate: 0.001 }, ...configure(redis) } as MiddlewareOptions;
  // A route with a limit of its own: its own key prefix keeps it apart.
  app.get('/search', rateLimit({ ...options, limit: { limit: 1, rate: 0.001, prefix: 'ratelimit:search:', policy: 'search' } }));
  app.use(rateLimit(options));
  app.get('/search', (_req, res) => { res.json({ ok: 'search' }); });
  app.get('/', (_req, res) => { res.json({ ok: true }); });
  const http = app.listen(0);
  await new Promise((r) => http.once('listening', r));
  const { port } = http.address() as AddressInfo;
  try {
    await body((path, headers) => fetch(`http://127.0.0.1:${port}${path}`, { headers }), server);
  } finally {
    http.close();
    redis.destroy();
    await server.stop();
  }
}

function rateHeaders(res: Response) {
  return {
    policy: res.headers.get('ratelimit-policy'),
    limit: res.headers.get('ratelimit'),
    retryAfter: res.headers.get('retry-after'),
    legacy: [res.headers.get('ratelimit-limit'), res.headers.get('ratelimit-remaining'), res.headers.get('ratelimit-reset')],
  };
}

test('allowed requests carry the IETF fields, the fourth gets 429', async () => {
  await withApp(() => ({}), async (get) => {
    // capacity 3 at 0.001/s: w = 3000 s, and one token back takes 1000 s.
    const expected = [
      '"default";r=2;t=1000',
      '"default";r=1;t=2000',
      '"default";r=0;t=3000',
    ];
    for (const limit of expected) {
      const res = await get('/');
      assert.equal(res.status, 200);
      assert.deepEqual(rateHeaders(res), { policy: '"default";q=3;w=3000', limit, retryAfter: null, legacy: [null, null, null] });
      assert.deepEqual(await res.json(), { ok: true });
    }
    const denied = await get('/');
    assert.equal(denied.status, 429);
    assert.deepEqual(rateHeaders(denied), {
      policy: '"default";q=3;w=3000',
      limit: '"default";r=0;t=3000',
      retryAfter: '1000',
      legacy: [null, null, null],
    });
    assert.deepEqual(await denied.json(), {
      error: 'rate_limit_exceeded',
      message: 'Rate limit exceeded. Please try again later.',
      retry_after_seconds: 1000,
    });
  });
});

test('legacy headers on request, and the policy name', async () => {
  await withApp(() => ({ legacyHeaders: true, limit: { limit: 2, window: 60, algorithm: 'fixedwindow', policy: 'per-minute', now: 1700000050 } }), async (get) => {
    const res = await get('/');
    // The window [..040, ..100) ends 50 s after now.
    assert.deepEqual(rateHeaders(res), {
      policy: '"per-minute";q=2;w=60',
      limit: '"per-minute";r=1;t=50',
      retryAfter: null,
      legacy: ['2', '1', '50'],
    });
    await get('/');
    const denied = await get('/');
    assert.equal(denied.status, 429);
    assert.deepEqual(rateHeaders(denied).legacy, ['2', '0', '50']);
    assert.equal(rateHeaders(denied).retryAfter, '50');
  });
});

test('each API key has its own limit, and routes their own', async () => {
  await withApp(() => ({ key: byHeader('x-api-key') }), async (get) => {
    for (let i = 0; i < 3; i++) assert.equal((await get('/', { 'x-api-key': 'alpha' })).status, 200);
    assert.equal((await get('/', { 'x-api-key': 'alpha' })).status, 429);
    assert.equal((await get('/', { 'x-api-key': 'beta' })).status, 200);
    // /search has a limit of 1 of its own, before the app-wide one: both
    // policies are listed.
    const search = await get('/search', { 'x-api-key': 'gamma' });
    assert.equal(search.status, 200);
    assert.deepEqual(await search.json(), { ok: 'search' });
    assert.equal(search.headers.get('ratelimit-policy'), '"search";q=1;w=1000, "default";q=3;w=3000');
    assert.equal(search.headers.get('ratelimit'), '"search";r=0;t=1000, "default";r=2;t=1000');
    const denied = await get('/search', { 'x-api-key': 'gamma' });
    assert.equal(denied.status, 429);
    assert.equal(denied.headers.get('ratelimit'), '"search";r=0;t=1000');
    assert.equal(denied.headers.get('retry-after'), '1000');
  });
});

test('Redis down: fail open by default, with a log line', async () => {
  const lines: string[] = [];
  await withApp(() => ({ log: (line) => lines.push(line), timeoutMs: 300 }), async (get, server) => {
    assert.equal((await get('/')).status, 200);
    await server.stop();
    const res = await get('/');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('ratelimit'), null);
    assert.deepEqual(await res.json(), { ok: true });
    assert.equal(lines.length, 1);
    assert.match(lines[0], /^rate limiter unavailable \(letting the request through\): /);
  });
});

test('Redis down: fail closed answers 503', async () => {
  const lines: string[] = [];
  await withApp(() => ({ failOpen: false, log: (line) => lines.push(line), timeoutMs: 300 }), async (get, server) => {
    await server.stop();
    const res = await get('/');
    assert.equal(res.status, 503);
    assert.deepEqual(await res.json(), { error: 'rate_limiter_unavailable' });
    assert.match(lines[0], /^rate limiter unavailable \(refusing it\): /);
  });
});

test('keyed by user: each signed-in user has their own limit', async () => {
  await withApp(() => ({ key: byUser }), async (get) => {
    for (let i = 0; i < 3; i++) assert.equal((await get('/', { 'x-user': 'ada' })).status, 200);
    assert.equal((await get('/', { 'x-user': 'ada' })).status, 429);
    const other = await get('/', { 'x-user': 'grace' });
    assert.equal(other.headers.get('ratelimit'), '"default";r=2;t=1000');
  });
});
