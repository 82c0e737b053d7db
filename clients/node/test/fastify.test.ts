// The Fastify plugin on real HTTP servers, Fastify 4 and Fastify 5,
// against a real redis-server in both modes (with the module, and without
// it running the Lua script).

import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';

import Fastify5 from 'fastify';
import Fastify4 from 'fastify4';
import { Redis } from 'ioredis';

import { fastifyRateLimit, type MiddlewareOptions } from '../src/index.js';
import { abortingClients, BUSY, concurrencyOverHttp, Gate, Handlers, SHORT, SLOTS } from './concurrency.js';
import { headerStylesOverHttp, STYLE_LIMITS } from './header-styles.js';
import { MODES } from './modes.js';
import { RedisServer } from './servers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

declare module 'fastify' {
  interface FastifyRequest {
    rateLimit?: import('../src/index.js').Decision;
  }
}

// Compile-time check: the plugin registers on both versions' typed instances, without a cast.
export async function typesFit(redis: Redis) {
  await Fastify5().register(fastifyRateLimit, { redis, limits: { limit: 1, rate: 1 } });
  await Fastify4().register(fastifyRateLimit, { redis, limits: { limit: 1, rate: 1 } });
}

type AnyFastify = (options?: object) => any;
for (const { mode, withModule } of MODES) describe(`mode ${mode}`, () => {
  let server: RedisServer;
  let redis: Redis;

  before(async () => {
    server = await RedisServer.start([], withModule);
    redis = new Redis(server.port, '127.0.0.1');
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
  });
  beforeEach(async () => {
    await server.cli('flushall');
  });

  for (const [version, Fastify] of [['Fastify 4', Fastify4 as AnyFastify], ['Fastify 5', Fastify5 as AnyFastify]] as const) {
  describe(version, () => {
    async function withApp(options: Omit<MiddlewareOptions, 'redis'>, body: (get: (path: string) => Promise<Response>) => Promise<void>) {
      const app: any = Fastify();
      await app.register(fastifyRateLimit, { redis, mode, ...options });
      app.get('/', async (request: any) => ({ remaining: request.rateLimit?.limits.map((l: { remaining: number }) => l.remaining) }));
      app.get('/search', { config: { rateLimit: { limits: { name: 'search', limit: 1, rate: 0.001 } } } }, async () => ({ ok: 'search' }));
      app.get('/health', { config: { rateLimit: false } }, async () => ({ ok: true }));
      app.get('/missing', async (_request: any, reply: any) => reply.code(404).send({ found: false }));
      const address = await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        await body((path) => fetch(`${address}${path}`));
      } finally {
        await app.close();
      }
    }


    test('headers, the decision on request.rateLimit, and 429 with t = Retry-After', async () => {
      await withApp({ limits: { limit: 2, rate: 0.001, name: 'app' } }, async (get) => {
        const first = await get('/');
        assert.equal(first.status, 200);
        assert.deepEqual(await first.json(), { remaining: [1] });
        assert.equal(first.headers.get('ratelimit-policy'), '"app";q=2;w=2000');
        assert.equal(first.headers.get('ratelimit'), '"app";r=1;t=1000');
        await get('/');
        const denied = await get('/');
        assert.equal(denied.status, 429);
        assert.equal(denied.headers.get('ratelimit'), '"app";r=0;t=1000');
        assert.equal(denied.headers.get('retry-after'), '1000');
        assert.deepEqual(await denied.json(), { error: 'rate_limit_exceeded', message: 'Rate limit exceeded. Please try again later.', retry_after_seconds: 1000 });
      });
    });

    test('a route\'s own limits go with the app\'s in one call; a route can opt out', async () => {
      await withApp({ limits: { limit: 5, rate: 0.001, name: 'app' } }, async (get) => {
        const search = await get('/search');
        assert.equal(search.headers.get('ratelimit'), '"app";r=4;t=1000, "search";r=0;t=1000');
        const denied = await get('/search');
        assert.equal(denied.status, 429);
        // Denied as a whole: the app limit keeps its units...
        assert.equal(denied.headers.get('ratelimit'), '"app";r=4;t=1000, "search";r=0;t=1000');
        for (let i = 0; i < 10; i++) assert.equal((await get('/health')).headers.get('ratelimit'), null);
        // ...and took nothing: the app limit had 4 left.
        assert.equal((await get('/')).headers.get('ratelimit'), '"app";r=3;t=1000');
      });
    });

    test('an error reply is a server error (500), never a pass', async () => {
      await server.cli('set', 'ratelimit:{ip:127.0.0.1}:app', 'not a limiter');
      await withApp({ limits: { limit: 5, rate: 0.001, name: 'app' }, log: () => assert.fail('no log line') }, async (get) => {
        const res = await get('/');
        assert.equal(res.status, 500);
        assert.match(((await res.json()) as { message: string }).message, /^WRONGTYPE/);
      });
    });

    test('skipFailedRequests refunds a 404; Redis too slow and failing closed is a 503', async () => {
      await withApp({ limits: { limit: 5, rate: 0.001, name: 'app' }, skipFailedRequests: true, timeoutMs: 200, failOpen: false, log: () => {} }, async (get) => {
        for (let i = 0; i < 3; i++) assert.equal((await get('/missing')).headers.get('ratelimit'), '"app";r=4;t=1000');
        await sleep(50);
        assert.equal((await get('/')).headers.get('ratelimit'), '"app";r=4;t=1000');
        await server.cli('client', 'pause', '800', 'ALL');
        const closed = await get('/');
        assert.deepEqual([closed.status, await closed.json()], [503, { error: 'rate_limiter_unavailable' }]);
        await sleep(1200); // Redis is tried again a second after the failure
        // Over a second has passed: the bucket has refilled a thousandth of a token, t one second less.
        assert.match((await get('/')).headers.get('ratelimit')!, /^"app";r=3;t=(999|1000)$/);
      });
    });

    test('concurrency: 429 with qu="concurrent-requests" over the limit; the slot back after the response, a throw, a disconnect; a crashed holder\'s when its lease runs out', async () => {
      const gate = new Gate();
      const app: any = Fastify();
      await app.register(fastifyRateLimit, { redis, mode, limits: SLOTS });
      app.get('/short', { config: { rateLimit: { limits: SHORT } } }, async () => ({ ok: true }));
      app.get('/slow', async () => {
        await gate.pass();
        return { ok: true };
      });
      app.get('/fast', async () => ({ ok: true }));
      app.get('/boom', async () => {
        throw new Error('boom');
      });
      const url = await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        await concurrencyOverHttp({ url, server, redis, mode, gate });
      } finally {
        await app.close();
      }
    });

    test('headers: draft-10 (the default, or true), draft-6, legacy, false: each one\'s exact fields, Retry-After on every 429', async () => {
      await headerStylesOverHttp(async (headers) => {
        const app: any = Fastify();
        await app.register(fastifyRateLimit, { redis, mode, limits: STYLE_LIMITS, ...(headers === undefined ? {} : { headers }) });
        app.get('/', async () => ({ ok: true }));
        const url = await app.listen({ port: 0, host: '127.0.0.1' });
        return { url, close: () => app.close() };
      }, () => server.cli('flushall'));
    });

    test('concurrency: clients that abort at 40 ms never free a slot while its 100 ms handler runs (never above the limit of 3)', async () => {
      const handlers = new Handlers();
      // The aborted fetches leave connections behind: without forcing them
      // closed, app.close() can wait out Fastify's keep-alive timeout (72 s).
      const app: any = Fastify({ forceCloseConnections: true });
      await app.register(fastifyRateLimit, { redis, mode, limits: BUSY });
      app.get('/busy', async () => {
        await handlers.work();
        return { ok: true };
      });
      const url = await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        await abortingClients({ url, server, handlers });
      } finally {
        await app.close();
      }
    });

    test('skip, a custom handler, and a request that can never pass', async () => {
      const app: any = Fastify();
      await app.register(fastifyRateLimit, {
        redis,
        mode,
        limits: { name: 'tokens', limit: 100, rate: 0.001, cost: async (request: any) => Number(request.query.tokens ?? 1) },
        skip: (request: any) => request.headers['x-internal'] === 'yes',
        handler: (_request: any, reply: any, decision: any) => reply.code(429).send({ denied: decision.limits.map((l: any) => l.name), never: decision.neverAllowed }),
      });
      app.get('/', async () => ({ ok: true }));
      const address = await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        const skipped = await fetch(`${address}/?tokens=1000`, { headers: { 'x-internal': 'yes' } });
        assert.deepEqual([skipped.status, skipped.headers.get('ratelimit')], [200, null]);
        const never = await fetch(`${address}/?tokens=101`);
        assert.deepEqual([never.status, never.headers.get('retry-after'), never.headers.get('ratelimit'), await never.json()], [429, null, '"tokens";r=100', { denied: ['tokens'], never: true }]);
        const ok = await fetch(`${address}/?tokens=100`);
        assert.deepEqual([ok.status, ok.headers.get('ratelimit')], [200, '"tokens";r=0;t=1000']);
        const denied = await fetch(`${address}/`);
        assert.deepEqual([denied.status, denied.headers.get('retry-after'), await denied.json()], [429, '1000', { denied: ['tokens'], never: false }]);
      } finally {
        await app.close();
      }
    });
  });
  }
});
