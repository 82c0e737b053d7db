// check(), the framework-free call, through each single-server client, in
// both modes (a redis-server with the module, one without it running the
// Lua script): one RL.MULTI for all limits, refunds, errors as errors, and
// Redis unavailable or slow.

import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';

import { createLimiter, RateLimiterUnavailable, type LimiterOptions } from '../src/index.js';
import { SINGLE, type AppClient } from './clients.js';
import { MODES } from './modes.js';
import { RedisServer } from './servers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Req = { ip: string; user?: string; tokens?: number };

for (const { mode, withModule } of MODES) for (const [name, connect] of Object.entries(SINGLE)) {
  describe(`check() with ${name}, mode ${mode}`, () => {
    let server: RedisServer;
    let app: AppClient;
    const limiters: { close(): void }[] = [];
    const limiter = (options: Omit<LimiterOptions<Req>, 'redis'>) => {
      const made = createLimiter<Req>({ redis: app.client, mode, ...options });
      limiters.push(made);
      return made;
    };

    before(async () => {
      server = await RedisServer.start([], withModule);
      app = await connect(server);
    });
    after(async () => {
      for (const made of limiters) made.close();
      await app.close();
      await server.stop();
    });
    beforeEach(async () => {
      await server.cli('flushall');
    });

    test('one limit: the module\'s reply as a decision, keyed by address', async () => {
      const check = limiter({ limits: { limit: 3, rate: 0.001 } });
      const first = await check.check({ ip: '203.0.113.7' });
      assert.ok(first);
      assert.equal(first.allowed, true);
      assert.equal(first.retryAfterMs, 0);
      const [only] = first.limits;
      assert.deepEqual(
        { ...only, resetAfterMs: Math.ceil(only.resetAfterMs / 1000) },
        {
          name: 'default', algorithm: 'tokenbucket', key: 'ratelimit:{ip:203.0.113.7}:tokenbucket:3:0.001', allowed: true,
          remaining: 2, limit: 3, retryAfterMs: 0, resetAfterMs: 1000, cost: 1, param: 0.001, quotaUnit: undefined,
        },
      );
      // The state is the module's type, or the script's plain string.
      assert.equal(await server.cli('type', only.key), mode === 'module' ? 'ratelimit' : 'string');
      await check.check({ ip: '203.0.113.7' });
      await check.check({ ip: '203.0.113.7' });
      const denied = await check.check({ ip: '203.0.113.7' });
      assert.equal(denied?.allowed, false);
      assert.equal(Math.ceil(denied!.retryAfterMs / 1000), 1000);
      assert.equal((await check.check({ ip: '203.0.113.8' }))?.allowed, true);
    });

    test('an unnamed limit is keyed by what it is: the same key texts as the Python client', async () => {
      const keyOf = async (limits: LimiterOptions<Req>['limits'], req: Req = { ip: '10.0.0.1' }) => {
        const decision = await limiter({ key: () => 'user:7', limits }).check(req);
        assert.equal(decision?.limits[0].name, 'default');
        return decision?.limits[0].key;
      };
      assert.equal(await keyOf({ limit: 10, rate: 0.5 }), 'ratelimit:{user:7}:tokenbucket:10:0.5');
      assert.equal(await keyOf({ algorithm: 'leakybucket', limit: 3, rate: 1000 }), 'ratelimit:{user:7}:leakybucket:3:1000');
      assert.equal(await keyOf({ algorithm: 'slidingwindow', limit: 100, window: 0.25 }), 'ratelimit:{user:7}:slidingwindow:100:0.25');
      assert.equal(await keyOf({ algorithm: 'slidinglog', limit: 9007199254740991, window: 1e12 }), 'ratelimit:{user:7}:slidinglog:9007199254740991:1000000000000');
      assert.equal(await keyOf({ limit: 1000, rate: 10, quotaUnit: 'content-bytes' }), 'ratelimit:{user:7}:tokenbucket:1000:10:content-bytes');
      assert.equal(await keyOf({ name: 'default', limit: 10, rate: 0.5 }), 'ratelimit:{user:7}:default'); // a name is the key
      // A limit per request (a quota per plan): the key holds the limit this request resolved to.
      const perPlan = { algorithm: 'fixedwindow', limit: (req: Req) => (req.user === 'pro' ? 50 : 5), window: 60 } as const;
      assert.equal(await keyOf(perPlan, { ip: '10.0.0.1', user: 'free' }), 'ratelimit:{user:7}:fixedwindow:5:60');
      assert.equal(await keyOf(perPlan, { ip: '10.0.0.1', user: 'pro' }), 'ratelimit:{user:7}:fixedwindow:50:60');
    });

    test('check() without a request, or a request without an address: refused, nothing taken', async () => {
      const check = limiter({ limits: { limit: 3, rate: 1 } });
      await assert.rejects(check.check(undefined as never), /^TypeError: byIp: no request to key by/);
      await assert.rejects(check.check({} as Req), /^TypeError: byIp: the request carries no client address/);
      assert.equal(await server.cli('dbsize'), '0');
    });

    test('per user and per IP, requests and tokens: all or nothing in one RL.MULTI', async () => {
      const check = limiter({
        key: (req) => `user:${req.user}`,
        limits: [
          { name: 'requests', limit: 5, rate: 0.001 },
          { name: 'tokens', algorithm: 'slidingwindow', limit: 1000, window: 60, cost: (req) => req.tokens ?? 0 },
          { name: 'per-ip', algorithm: 'fixedwindow', limit: 100, window: 3600, key: async (req) => `ip:${req.ip}` },
        ],
      });
      const ok = await check.check({ ip: '10.0.0.1', user: 'ada', tokens: 600 });
      assert.deepEqual(ok?.limits.map((l) => [l.name, l.key, l.allowed, l.remaining, l.cost]), [
        ['requests', 'ratelimit:{user:ada}:requests', true, 4, 1],
        ['tokens', 'ratelimit:{user:ada}:tokens', true, 400, 600],
        ['per-ip', 'ratelimit:{ip:10.0.0.1}:per-ip', true, 99, 1],
      ]);
      // 600 more tokens do not fit: nothing is taken anywhere, and each limit
      // reports the state it keeps.
      const denied = await check.check({ ip: '10.0.0.1', user: 'ada', tokens: 600 });
      assert.equal(denied?.allowed, false);
      assert.deepEqual(denied?.limits.map((l) => [l.name, l.allowed, l.remaining]), [
        ['requests', true, 4],
        ['tokens', false, 400],
        ['per-ip', true, 99],
      ]);
      const peek = await check.check({ ip: '10.0.0.1', user: 'ada', tokens: 0 });
      assert.deepEqual(peek?.limits.map((l) => l.remaining), [3, 400, 98]);
    });

    test('a request that can never pass', async () => {
      const check = limiter({ limits: { limit: 10, rate: 1, cost: (req) => req.tokens ?? 1 } });
      const never = await check.check({ ip: '10.0.0.2', tokens: 11 });
      assert.equal(never?.allowed, false);
      assert.equal(never?.retryAfterMs, -1);
      assert.equal(never?.neverAllowed, true);
      assert.equal(await server.cli('exists', 'ratelimit:{ip:10.0.0.2}:tokenbucket:10:1'), '0');
    });

    test('refund: reserve the most a call may use, give back what it did not', async () => {
      const check = limiter({ limits: { name: 'tokens', limit: 1000, rate: 0.001, cost: 400 } });
      const reserved = await check.check({ ip: '10.0.0.3' });
      assert.equal(reserved?.limits[0].remaining, 600);
      await reserved!.refund(250); // used 150 of the 400
      const after = await check.check({ ip: '10.0.0.3' });
      assert.equal(after?.limits[0].remaining, 450);
      await after!.refund();
      await reserved!.refund(1000); // at most its own 400 back
      assert.equal((await check.check({ ip: '10.0.0.3' }))?.limits[0].remaining, 600);
    });

    test('an error reply is a server error, never a pass', async () => {
      const lines: string[] = [];
      const check = limiter({ limits: { limit: 10, rate: 1 }, log: (line) => lines.push(line) });
      await server.cli('set', 'ratelimit:{ip:10.0.0.4}:tokenbucket:10:1', 'a string');
      await assert.rejects(check.check({ ip: '10.0.0.4' }), {
        // The module cannot tell a plain value from script-mode state, so it names both modes.
        module: { name: 'RateLimitModeError', message: 'WRONGTYPE ratelimit:{ip:10.0.0.4}:tokenbucket:10:1 holds a Redis string, not the redis-ratelimit module\'s state: script-mode state (script mode keeps plain Redis values) or another value; module mode cannot use it: give each mode its own key prefix' },
        script: { message: 'WRONGTYPE Operation against a key holding the wrong kind of value' },
      }[mode]);
      assert.equal(await server.cli('get', 'ratelimit:{ip:10.0.0.4}:tokenbucket:10:1'), 'a string');
      // A per-request cost that is not a whole number is a programming error too.
      const bad = limiter({ limits: { limit: 10, rate: 1, cost: () => 2.5 } });
      await assert.rejects(bad.check({ ip: '10.0.0.5' }), /^RateLimitConfigError: default: cost: must be an integer from 0 to 9007199254740991 \(got 2.5\)$/);
      const badLimit = limiter({ limits: { limit: async () => 0, rate: 1 } });
      await assert.rejects(badLimit.check({ ip: '10.0.0.5' }), /^RateLimitConfigError: default: limit: must be an integer from 1 to 9007199254740991 \(got 0\)$/);
      assert.deepEqual(lines, []);
    });

    test('no answer in time: fail open, and the paused call never charges later', async () => {
      const lines: string[] = [];
      const check = limiter({ limits: { limit: 10, rate: 0.001 }, timeoutMs: 200, log: (line) => lines.push(line) });
      await check.check({ ip: '10.0.0.6' }); // connected, 9 left
      await server.cli('client', 'pause', '1000', 'ALL');
      const started = Date.now();
      assert.equal(await check.check({ ip: '10.0.0.6' }), null);
      assert.ok(Date.now() - started < 600);
      assert.deepEqual(lines, ['rate limiter unavailable: no answer from Redis within 200 ms (letting the request through)']);
      await sleep(1200); // the pause is over: a command still queued would run now
      const next = await check.check({ ip: '10.0.0.6' });
      assert.equal(next?.limits[0].remaining, 8);
    });

    test('no answer in time, failing closed: RateLimiterUnavailable', async () => {
      const check = limiter({ limits: { limit: 10, rate: 0.001 }, timeoutMs: 200, failOpen: false, log: () => {} });
      await check.check({ ip: '10.0.0.7' });
      await server.cli('client', 'pause', '800', 'ALL');
      await assert.rejects(check.check({ ip: '10.0.0.7' }), RateLimiterUnavailable);
      await sleep(1000);
      assert.equal((await check.check({ ip: '10.0.0.7' }))?.limits[0].remaining, 8);
    });

    test('Redis restarts: calls made while it is down are not replayed', async () => {
      const lines: string[] = [];
      const check = limiter({ limits: { limit: 10, rate: 0.001 }, timeoutMs: 300, log: (line) => lines.push(line) });
      assert.equal((await check.check({ ip: '10.0.0.8' }))?.limits[0].remaining, 9);
      await server.kill();
      for (let i = 0; i < 3; i++) assert.equal(await check.check({ ip: '10.0.0.9' }), null);
      assert.equal(lines.length, 3);
      await server.run();
      // Once reconnected, the first call is the first charge for 10.0.0.9.
      let decision = null;
      for (let i = 0; i < 100 && decision === null; i++) {
        decision = await check.check({ ip: '10.0.0.9' });
        if (decision === null) await sleep(100);
      }
      assert.equal(decision?.limits[0].remaining, 9);
    });
  });
}
