// onUnavailable 'local' over real HTTP (Express 4 and 5, Fastify 4 and 5),
// in both modes, with the test's redis-server stopped and started again:
// the in-process limits, each divided by `instances`, with exact statuses
// and headers; limiting by Redis again within about a second of its return.

import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';

import express5 from 'express';
import express4 from 'express4';
import Fastify5 from 'fastify';
import Fastify4 from 'fastify4';
import { Redis } from 'ioredis';
import { createClient } from 'redis';

import { createLimiter, fastifyRateLimit, rateLimit, RateLimiterUnavailable, type Decision, type DecisionEvent, type MiddlewareOptions } from '../src/index.js';
import { Gate } from './concurrency.js';
import { MODES } from './modes.js';
import { RedisServer } from './servers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Get = (path: string) => Promise<Response>;
/** Starts an app limited by `options` with a route `/` (that awaits `handler` first), runs `body` against it, closes it. */
type Framework = (redis: { client: unknown }, options: Omit<MiddlewareOptions, 'redis'>, body: (get: Get) => Promise<void>, handler?: () => Promise<void>) => Promise<void>;

function express(version: typeof express5 | typeof express4): Framework {
  return async (redis, options, body, handler) => {
    const app: any = version();
    const middleware = rateLimit({ redis: redis.client, ...options });
    app.use(middleware);
    app.get('/', async (_req: any, res: any) => {
      await handler?.();
      res.json({ ok: true });
    });
    const http = app.listen(0);
    await new Promise((r) => http.once('listening', r));
    const { port } = http.address() as AddressInfo;
    try {
      await body((path) => fetch(`http://127.0.0.1:${port}${path}`));
    } finally {
      http.close();
      middleware.limiter.close();
    }
  };
}

function fastify(version: (options?: object) => any): Framework {
  return async (redis, options, body, handler) => {
    const app = version();
    await app.register(fastifyRateLimit, { redis: redis.client, ...options });
    app.get('/', async () => {
      await handler?.();
      return { ok: true };
    });
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      await body((path) => fetch(`${address}${path}`));
    } finally {
      await app.close();
    }
  };
}

const FRAMEWORKS: [string, Framework, 'node-redis' | 'ioredis'][] = [
  ['Express 4', express(express4), 'node-redis'],
  ['Express 5', express(express5), 'node-redis'],
  ['Fastify 4', fastify(Fastify4 as (options?: object) => any), 'ioredis'],
  ['Fastify 5', fastify(Fastify5 as (options?: object) => any), 'ioredis'],
];

function fields(res: Response) {
  return [res.status, res.headers.get('ratelimit-policy'), res.headers.get('ratelimit'), res.headers.get('retry-after')];
}

for (const { mode, withModule } of MODES) describe(`onUnavailable 'local', mode ${mode}`, () => {
  let server: RedisServer;
  let down = false;

  before(async () => {
    server = await RedisServer.start([], withModule);
  });
  after(async () => {
    await server.stop();
  });

  /** Stops the server; back on its port by the end of the test whatever happens. */
  async function stopRedis() {
    await server.kill();
    down = true;
  }
  async function startRedis() {
    if (down) await server.run();
    down = false;
  }

  async function appClient(kind: 'node-redis' | 'ioredis') {
    if (kind === 'ioredis') {
      const client = new Redis(server.port, '127.0.0.1');
      client.on('error', () => {});
      return { client, close: async () => client.disconnect() };
    }
    const client = createClient({ url: server.url });
    client.on('error', () => {});
    await client.connect();
    return { client, close: async () => client.destroy() };
  }

  for (const [name, framework, kind] of FRAMEWORKS) {
    test(`${name}: Redis stopped, each limit / instances in process with exact headers; Redis limits again within about a second of its return`, async () => {
      await server.cli('flushall');
      const redis = await appClient(kind);
      const lines: string[] = [];
      const outcomes: string[] = [];
      const options: Omit<MiddlewareOptions, 'redis'> = {
        mode,
        limits: [
          { name: 'app', limit: 4, rate: 0.001 },
          { name: 'daily', algorithm: 'slidinglog', limit: 5, window: 86400 },
        ],
        onUnavailable: 'local',
        instances: 2,
        timeoutMs: 5000,
        log: (line) => lines.push(line),
        onDecision: (event: DecisionEvent) => outcomes.push(event.outcome),
      };
      try {
        await framework(redis, options, async (get) => {
          const whole = '"app";q=4;w=4000, "daily";q=5;w=86400';
          assert.deepEqual(fields(await get('/')), [200, whole, '"app";r=3;t=1000, "daily";r=4;t=86400', null]);
          await stopRedis();
          const started = performance.now();
          // In process: app 4 / 2 = 2 at 0.001 / 2 = 0.0005 a second, daily 5 / 2 = 2 (rounded down); the Redis state is not known here.
          const half = '"app";q=2;w=4000, "daily";q=2;w=86400';
          assert.deepEqual(fields(await get('/')), [200, half, '"app";r=1;t=2000, "daily";r=1;t=86400', null]);
          assert.deepEqual(fields(await get('/')), [200, half, '"app";r=0;t=2000, "daily";r=0;t=86400', null]);
          const denied = await get('/');
          // The wait is the longest: the daily log's first unit leaves in a day.
          assert.deepEqual(fields(denied), [429, half, '"app";r=0;t=86400, "daily";r=0;t=86400', '86400']);
          assert.deepEqual(await denied.json(), { error: 'rate_limit_exceeded', message: 'Rate limit exceeded. Please try again later.', retry_after_seconds: 86400 });
          assert.ok(performance.now() - started < 2500, 'a refused connection fails at once, not after the 5 s timeout');
          assert.equal(lines.length, 1);
          assert.match(lines[0], /^rate limiter unavailable: .+ \(limiting in process; Redis is tried again in a second\)$/);
          assert.deepEqual(outcomes, ['allowed', 'unavailable_local_allowed', 'unavailable_local_allowed', 'unavailable_local_denied']);
          await startRedis();
          const back = performance.now();
          for (;;) {
            const res = await get('/');
            if (res.headers.get('ratelimit-policy') === whole) {
              // The restarted server kept nothing, and the local decisions wrote nothing to it.
              assert.deepEqual(fields(res), [200, whole, '"app";r=3;t=1000, "daily";r=4;t=86400', null]);
              break;
            }
            assert.deepEqual(fields(res).slice(0, 2), [429, half]); // still in process, still denied
            assert.ok(performance.now() - back < 2500, 'limiting by Redis resumes within about a second');
            await sleep(20);
          }
          assert.equal(outcomes.at(-1), 'allowed');
        });
      } finally {
        await startRedis();
        await redis.close();
      }
    });
 
    test(`${name}: the limiter 'open' (the default), a concurrency limit 'local' (its default): Redis stopped, limit / instances handlers at once in process, the open limit left out`, async () => {
      await server.cli('flushall');
      const redis = await appClient(kind);
      const gate = new Gate();
      let opened = false;
      const options: Omit<MiddlewareOptions, 'redis'> = {
        mode,
        limits: [{ name: 'app', limit: 100, rate: 0.001 }, { name: 'slots', algorithm: 'concurrency', limit: 4, lease: 30 }],
        instances: 2,
        timeoutMs: 5000,
        log: () => {},
      };
      try {
        await framework(redis, options, async (get) => {
          await stopRedis();
          const slots = '"slots";q=2;qu="concurrent-requests"';
          const held = [get('/'), get('/')];
          await gate.until(2);
          // Two of the 4 / 2 slots held by running handlers: the third waits a second, never the 30 s lease.
          assert.deepEqual(fields(await get('/')), [429, slots, '"slots";r=0;t=1', '1']);
          assert.equal(gate.entered, 2);
          gate.open();
          assert.deepEqual((await Promise.all(held)).map(fields).sort(), [[200, slots, '"slots";r=0;t=30', null], [200, slots, '"slots";r=1;t=30', null]]);
          opened = true;
          const after = await get('/'); // both released in process when their responses ended
          assert.deepEqual(fields(after), [200, slots, '"slots";r=1;t=30', null]);
        }, async () => {
          if (!opened) await gate.pass();
        });
      } finally {
        await startRedis();
        await redis.close();
      }
    });

  }

  test('check(): a limit below instances is 1 in process, its rate divided; limiters made with with() share the in-process state', async () => {
    const redis = await appClient('ioredis');
    const app = createLimiter({ redis: redis.client, mode, limits: { name: 'app', limit: 3, rate: 0.001 }, key: () => 'k', onUnavailable: 'local', instances: 4, log: () => {} });
    const route = app.with({ name: 'route', algorithm: 'fixedwindow', limit: 100, window: 60 });
    try {
      assert.equal((await app.check({}))?.limits[0].remaining, 2);
      await stopRedis();
      const first = await route.check({});
      assert.deepEqual(first?.limits.map((l) => [l.name, l.allowed, l.limit, l.remaining]), [['app', true, 1, 0], ['route', true, 25, 24]]);
      const second = await app.check({});
      assert.deepEqual([second?.allowed, second?.limits[0].limit, second?.limits[0].remaining], [false, 1, 0]);
      // Its rate divided too, 0.001 / 4: a token comes back in 4000 s, less the few milliseconds since the first call.
      assert.ok(second!.retryAfterMs > 3_999_000 && second!.retryAfterMs <= 4_000_000, String(second?.retryAfterMs));
      // A local decision's units are not given back: they were never taken in Redis.
      await first?.refund();
      assert.equal((await app.check({}))?.allowed, false);
    } finally {
      app.close();
      await startRedis();
      await redis.close();
    }
  });

  test('check(): a concurrency limit in process: limit / instances slots, release() frees one in process, also once Redis is back', async () => {
    const redis = await appClient('ioredis');
    const limiter = createLimiter({ redis: redis.client, mode, limits: { name: 'slots', algorithm: 'concurrency', limit: 4, lease: 30 }, key: () => 'k', onUnavailable: 'local', instances: 2, log: () => {} });
    try {
      const inRedis = await limiter.check({});
      assert.deepEqual([inRedis?.limits[0].remaining, inRedis?.limits[0].leaseId], [3, 1]);
      await stopRedis();
      const first = await limiter.check({});
      const second = await limiter.check({});
      const third = await limiter.check({});
      assert.deepEqual(
        [first, second, third].map((d) => [d?.allowed, d?.limits[0].limit, d?.limits[0].remaining, d?.limits[0].leaseId]),
        [[true, 2, 1, 1], [true, 2, 0, 2], [false, 2, 0, 0]],
      );
      // The first lease runs out in 30 s, but slots free as requests end: the retryAfter hint, 1 s by default.
      assert.equal(third!.retryAfterMs, 1000);
      await first!.release();
      assert.equal(await first!.renew(), false); // released: nothing left to renew
      const fourth = await limiter.check({});
      assert.deepEqual([fourth?.allowed, fourth?.limits[0].remaining, fourth?.limits[0].leaseId], [true, 0, 3]);
      await startRedis(); // empty: the server kept nothing
      let back = await limiter.check({});
      for (let i = 0; i < 30 && back?.limits[0].limit !== 4; i++) {
        await new Promise((r) => setTimeout(r, 100));
        back = await limiter.check({});
      }
      assert.deepEqual([back?.allowed, back?.limits[0].limit, back?.limits[0].remaining, back?.limits[0].leaseId], [true, 4, 3, 1]);
      assert.equal((await limiter.check({}))?.limits[0].leaseId, 2);
      // Leases taken in process are renewed and go back in process, never in Redis (where id 2 is another holder's).
      assert.equal(await second!.renew(), true);
      await second!.release();
      await fourth!.release();
      assert.deepEqual((await limiter.check({}))?.limits.map((l) => [l.remaining, l.leaseId]), [[1, 3]]);
    } finally {
      limiter.close();
      await startRedis();
      await redis.close();
    }
  });

  test('check(): the issue\'s buckets in process: 40 at 20/s with instances 4 is 10 at 5/s; 100 at 100/s with instances 2 is 50 at 50/s', async () => {
    const redis = await appClient('ioredis');
    const made = [
      createLimiter({ redis: redis.client, mode, limits: { name: 'a', limit: 40, rate: 20 }, key: () => 'k', onUnavailable: 'local', instances: 4, log: () => {} }),
      createLimiter({ redis: redis.client, mode, limits: { name: 'b', limit: 100, rate: 100 }, key: () => 'k', onUnavailable: 'local', instances: 2, log: () => {} }),
    ];
    try {
      await stopRedis();
      for (const [limiter, size, rate] of [[made[0], 10, 5], [made[1], 50, 50]] as const) {
        /** Checks until one is denied: how many were admitted, and when that denial came. */
        const drain = async () => {
          const started = performance.now();
          let admitted = 0;
          for (let decision = await limiter.check({}); decision?.allowed; decision = await limiter.check({})) {
            assert.deepEqual([decision.limits[0].limit, decision.limits[0].param], [size, rate]);
            admitted++;
            assert.ok(admitted < 1000);
          }
          return { admitted, seconds: (performance.now() - started) / 1000, at: performance.now() };
        };
        // A full bucket of the divided size, and what its divided rate brought back meanwhile.
        const first = await drain();
        assert.ok(first.admitted >= size && first.admitted <= size + Math.ceil(rate * first.seconds) + 1, JSON.stringify(first));
        // A second later: about `rate` more, the divided rate, never the whole limit's.
        await sleep(1000);
        const second = await drain();
        const elapsed = (performance.now() - first.at) / 1000;
        assert.ok(second.admitted >= rate && second.admitted <= Math.ceil(rate * elapsed) + 1, JSON.stringify({ ...second, elapsed }));
      }
    } finally {
      for (const limiter of made) limiter.close();
      await startRedis();
      await redis.close();
    }
  });

  test('check(): each limit\'s own onUnavailable, the strictest wins: closed refuses, else local decides over its local limits, else a pass', async () => {
    const redis = await appClient('ioredis');
    const base = { redis: redis.client, mode, key: () => 'policy', log: () => {} };
    const slots = { name: 'slots', algorithm: 'concurrency', limit: 4, lease: 30 } as const;
    const bucket = { name: 'bucket', limit: 10, rate: 0.001 } as const;
    const limiters = {
      // The limiter open (the default), its concurrency limit local (that limit's default).
      openWithSlots: createLimiter({ ...base, limits: [bucket, slots], instances: 2 }),
      closedLimit: createLimiter({ ...base, limits: [{ ...bucket, onUnavailable: 'closed' }, slots] }),
      slotsOpen: createLimiter({ ...base, limits: [bucket, { ...slots, onUnavailable: 'open' }], onUnavailable: 'local' }),
      allOpen: createLimiter({ ...base, limits: [bucket, { ...slots, onUnavailable: 'open' }] }),
      closedLimiter: createLimiter({ ...base, limits: [{ ...bucket, onUnavailable: 'open' }, { ...slots, onUnavailable: 'local' }], onUnavailable: 'closed' }),
    };
    const outline = (d: Decision | null) => d && [d.allowed, d.retryAfterMs, d.limits.map((l) => [l.name, l.limit, l.remaining])];
    try {
      await stopRedis();
      const held = [await limiters.openWithSlots.check({}), await limiters.openWithSlots.check({})];
      assert.deepEqual(held.map(outline), [[true, 0, [['slots', 2, 1]]], [true, 0, [['slots', 2, 0]]]]);
      assert.deepEqual(outline(await limiters.openWithSlots.check({})), [false, 1000, [['slots', 2, 0]]]);
      await held[0]!.release();
      assert.deepEqual(outline(await limiters.openWithSlots.check({})), [true, 0, [['slots', 2, 0]]]);
      await assert.rejects(limiters.closedLimit.check({}), RateLimiterUnavailable);
      const slotsOpen = await limiters.slotsOpen.check({});
      assert.deepEqual(outline(slotsOpen), [true, 0, [['bucket', 10, 9]]]);
      assert.equal(await limiters.allOpen.check({}), null);
      // A limit's own policy stands against the limiter's: the concurrency limit local under a closed limiter.
      assert.deepEqual(outline(await limiters.closedLimiter.check({})), [true, 0, [['slots', 4, 3]]]);
    } finally {
      for (const limiter of Object.values(limiters)) limiter.close();
      await startRedis();
      await redis.close();
    }
  });
});
