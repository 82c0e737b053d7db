// check(), the framework-free call, through each single-server client, in
// both modes (a redis-server with the module, one without it running the
// Lua script): one RL.MULTI for all limits, refunds, errors as errors, and
// Redis unavailable or slow.

import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';

import { createLimiter, RateLimiterUnavailable, type Decision, type LimiterOptions } from '../src/index.js';
import { LATE, gaveUp } from '../src/link.js';
import { LIBRARY } from '../src/script.js';
import { SINGLE, type AppClient } from './clients.js';
import { MODES } from './modes.js';
import { RedisServer, until } from './servers.js';

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

    /** Each module call (in script mode, the library's) in the slow log, oldest first, as its argv. */
    async function sentCalls(): Promise<string[][]> {
      const log = JSON.parse(await server.cli('--json', 'slowlog', 'get', '-1')) as [number, number, number, string[]][];
      return log.map((entry) => entry[3]).filter(([command]) => /^(rl\..*|fcall|evalsha|eval)$/i.test(command)).reverse();
    }

    test('one limit goes as its own command (a concurrency limit as RL.ACQUIRE), several as one RL.MULTI', async () => {
      const one = limiter({ limits: { limit: 3, rate: 0.001 } });
      await one.check({ ip: '10.0.7.1' }); // script mode: the library loaded (a first FCALL may find it missing) before the log starts
      const slots = limiter({ limits: { name: 'slots', algorithm: 'concurrency', limit: 2, lease: 30 } });
      const two = limiter({ limits: [{ name: 'requests', limit: 5, rate: 0.001 }, { name: 'per-ip', algorithm: 'fixedwindow', limit: 100, window: 3600 }] });
      await server.cli('config', 'set', 'slowlog-log-slower-than', '0'); // every call logged, with its arguments
      await server.cli('slowlog', 'reset');
      try {
        const allowed = await one.check({ ip: '10.0.7.2' });
        assert.deepEqual([allowed?.allowed, allowed?.retryAfterMs, allowed?.limits.map((l) => [l.allowed, l.remaining, l.retryAfterMs])], [true, 0, [[true, 2, 0]]]);
        const leased = await slots.check({ ip: '10.0.7.3' });
        assert.deepEqual(leased?.limits.map((l) => [l.allowed, l.remaining, l.resetAfterMs, l.leaseId]), [[true, 1, 30_000, 1]]);
        await leased!.release();
        assert.equal(await server.cli('exists', 'ratelimit:{ip:10.0.7.3}:slots'), '0');
        const both = await two.check({ ip: '10.0.7.4' });
        assert.deepEqual(both?.limits.map((l) => [l.name, l.allowed, l.remaining]), [['requests', true, 4], ['per-ip', true, 99]]);
        const sent = (keys: string[], command: string, ...args: string[]) =>
          mode === 'module'
            ? [command, ...(command === 'RL.MULTI' ? [String(keys.length)] : []), ...keys, ...args]
            : ['FCALL', LIBRARY.name, String(keys.length), ...keys, command, ...args];
        assert.deepEqual(await sentCalls(), [
          sent(['ratelimit:{ip:10.0.7.2}:tokenbucket:3:0.001'], 'RL.TOKENBUCKET', '3', '0.001', '*', '1'),
          sent(['ratelimit:{ip:10.0.7.3}:slots'], 'RL.ACQUIRE', '2', '30', '*', '1'),
          sent(['ratelimit:{ip:10.0.7.3}:slots'], 'RL.RELEASE', '1', '*'),
          sent(['ratelimit:{ip:10.0.7.4}:requests', 'ratelimit:{ip:10.0.7.4}:per-ip'], 'RL.MULTI', '*', 'TOKENBUCKET', '5', '0.001', '1', 'FIXEDWINDOW', '100', '3600', '1'),
        ]);
      } finally {
        await server.cli('config', 'set', 'slowlog-log-slower-than', '10000');
      }
    });

    test('a request that can never pass', async () => {
      const check = limiter({ limits: { limit: 10, rate: 1, cost: (req) => req.tokens ?? 1 } });
      const never = await check.check({ ip: '10.0.0.2', tokens: 11 });
      assert.equal(never?.allowed, false);
      assert.equal(never?.retryAfterMs, -1);
      assert.equal(never?.neverAllowed, true);
      assert.equal(await server.cli('exists', 'ratelimit:{ip:10.0.0.2}:tokenbucket:10:1'), '0');
    });

    test('refund: reserve the most a call may use, give back to the limits named what it did not use', async () => {
      const check = limiter({
        limits: [
          { name: 'requests', limit: 60, rate: 0.001 },
          { name: 'tokens', limit: 1000, rate: 0.001, cost: 400 },
        ],
      });
      const reserved = await check.check({ ip: '10.0.0.3' });
      assert.deepEqual(reserved?.limits.map((l) => l.remaining), [59, 600]);
      await reserved!.refund({ tokens: 250 }); // used 150 of the 400; the request still counts
      const after = await check.check({ ip: '10.0.0.3' });
      assert.deepEqual(after?.limits.map((l) => l.remaining), [58, 450]);
      await after!.refund(); // no argument: every limit's whole cost
      await reserved!.refund({ tokens: 1000, requests: 0 }); // at most its own 400 back
      assert.deepEqual((await check.check({ ip: '10.0.0.3' }))?.limits.map((l) => l.remaining), [58, 600]);
      // The old bare number (it gave n to every limit) and unknown names are refused, and change nothing.
      const last = await check.check({ ip: '10.0.0.3' });
      await assert.rejects(last!.refund(5 as any), {
        name: 'TypeError',
        message: 'refund() takes units per limit name, e.g. refund({ "requests": 3 }), or nothing for every limit\'s cost (got 5)',
      });
      await assert.rejects(last!.refund({ token: 5 }), {
        name: 'TypeError',
        message: 'refund(): no limit named "token" in this decision (it has "requests", "tokens")',
      });
      await assert.rejects(last!.refund({ tokens: 1.5 }), /^RateLimitConfigError: refund\(\): tokens: must be an integer from 0 to 9007199254740991 \(got 1.5\)$/);
      const unchanged = await check.check({ ip: '10.0.0.3' }); // 400 more tokens do not fit in the 200 left
      assert.equal(unchanged?.allowed, false);
      assert.deepEqual(unchanged?.limits.map((l) => l.remaining), [57, 200]);
    });

    /** Calls Redis ran since the last CONFIG RESETSTAT: the module's, or the library's (less a "function not found" before FUNCTION LOAD, a NOSCRIPT before EVAL). */
    async function redisCalls(): Promise<number> {
      const stats = await server.cli('info', 'commandstats');
      return [...stats.matchAll(/^cmdstat_(?:rl\.\w+|fcall|evalsha|eval):calls=(\d+),.*failed_calls=(\d+)/gim)].reduce((sum, m) => sum + Number(m[1]) - Number(m[2]), 0);
    }

    test('denials answered in process: a flood of denied checks is one Redis call, Retry-After counting down', async () => {
      const check = limiter({ limits: [{ name: 'requests', limit: 2, rate: 0.001 }, { name: 'tokens', limit: 100, rate: 0.001, cost: (req) => req.tokens ?? 1 }] });
      await server.cli('config', 'resetstat');
      await check.check({ ip: '10.0.1.1' });
      await check.check({ ip: '10.0.1.1' });
      const denied = await check.check({ ip: '10.0.1.1' });
      assert.equal(denied?.allowed, false);
      assert.equal(await redisCalls(), 3);
      for (let i = 0; i < 300; i++) {
        const again = await check.check({ ip: '10.0.1.1', tokens: 1 + (i % 2) }); // the same cost, or more
        assert.equal(again?.allowed, false);
        assert.ok(again!.retryAfterMs > 0 && again!.retryAfterMs <= denied!.retryAfterMs);
        assert.deepEqual(again?.limits.map((l) => [l.name, l.allowed, l.remaining]), [['requests', false, 0], ['tokens', true, 98]]);
      }
      assert.equal(await redisCalls(), 3);
      // A smaller cost, another key, or the same key's other limits go to Redis.
      assert.equal((await check.check({ ip: '10.0.1.1', tokens: 0 }))?.allowed, false);
      assert.equal((await check.check({ ip: '10.0.1.2' }))?.allowed, true);
      assert.equal(await redisCalls(), 5);
    });

    test('denials answered in process: until retry_after_ms, a never admissible one for 1 s, least recently used out, off with 0', async () => {
      const check = limiter({ denialCache: 2, limits: { limit: 1, rate: 4, cost: (req) => req.tokens ?? 1 } });
      await server.cli('config', 'resetstat');
      await check.check({ ip: '10.0.2.1' });
      const wait = (await check.check({ ip: '10.0.2.1' }))?.retryAfterMs ?? 0;
      assert.ok(wait > 0 && wait <= 250);
      await sleep(300); // the denial ran out: Redis admits again
      assert.equal((await check.check({ ip: '10.0.2.1' }))?.allowed, true);
      assert.equal(await redisCalls(), 3);
      const never = await check.check({ ip: '10.0.2.2', tokens: 5 });
      assert.equal(never?.retryAfterMs, -1);
      assert.equal((await check.check({ ip: '10.0.2.2', tokens: 5 }))?.neverAllowed, true);
      assert.equal(await redisCalls(), 4);
      await sleep(1100);
      assert.equal((await check.check({ ip: '10.0.2.2', tokens: 5 }))?.neverAllowed, true);
      assert.equal(await redisCalls(), 5);
      // Two entries at most: a third denial pushes out the least recently used.
      await check.check({ ip: '10.0.2.3', tokens: 5 });
      await check.check({ ip: '10.0.2.4', tokens: 5 });
      assert.equal(await redisCalls(), 7);
      await check.check({ ip: '10.0.2.4', tokens: 5 });
      await check.check({ ip: '10.0.2.3', tokens: 5 });
      assert.equal(await redisCalls(), 7);
      await check.check({ ip: '10.0.2.2', tokens: 5 });
      assert.equal(await redisCalls(), 8);
      const off = limiter({ denialCache: 0, limits: { limit: 1, rate: 0.001 } });
      for (let i = 0; i < 5; i++) await off.check({ ip: '10.0.2.5' });
      assert.equal(await redisCalls(), 13);
    });

    /** RL.RELEASE calls (in script mode, the library's calls) since the last CONFIG RESETSTAT. */
    async function releaseCalls(): Promise<number> {
      const stats = await server.cli('info', 'commandstats');
      const command = mode === 'module' ? 'rl\\.release' : 'fcall|evalsha|eval';
      return [...stats.matchAll(new RegExp(`^cmdstat_(?:${command}):calls=(\\d+),.*failed_calls=(\\d+)`, 'gim'))].reduce((sum, m) => sum + Number(m[1]) - Number(m[2]), 0);
    }

    test('concurrency: check() takes a lease, release() frees it once, refund() leaves it, a denial is not answered in process', async () => {
      const check = limiter({ limits: [{ name: 'slots', algorithm: 'concurrency', limit: 2, lease: 30 }, { name: 'requests', limit: 100, rate: 0.001 }] });
      const first = await check.check({ ip: '10.0.4.1' });
      assert.deepEqual(first?.limits[0], {
        name: 'slots', algorithm: 'concurrency', key: 'ratelimit:{ip:10.0.4.1}:slots', allowed: true,
        remaining: 1, limit: 2, retryAfterMs: 0, resetAfterMs: 30_000, leaseId: 1, cost: 1, param: 30, quotaUnit: 'concurrent-requests',
      });
      const second = await check.check({ ip: '10.0.4.1' });
      assert.deepEqual(second?.limits.map((l) => [l.allowed, l.remaining, l.leaseId]), [[true, 0, 2], [true, 98, undefined]]);
      // All or nothing: the third takes no slot, and no request either.
      // Slots free as requests end, not when the 30 s leases run out: the retry time is the limit's retryAfter hint, 1 s by default.
      const denied = await check.check({ ip: '10.0.4.1' });
      assert.equal(denied?.allowed, false);
      assert.deepEqual([denied?.retryAfterMs, denied?.neverAllowed], [1000, false]);
      assert.deepEqual(denied?.limits.map((l) => [l.allowed, l.remaining, l.retryAfterMs, l.leaseId]), [[false, 0, 1000, 0], [true, 98, 0, undefined]]);
      const hinted = limiter({ limits: [{ name: 'slots', algorithm: 'concurrency', limit: 2, lease: 30, retryAfter: 0.25 }, { name: 'requests', limit: 100, rate: 0.001 }] });
      assert.deepEqual((await hinted.check({ ip: '10.0.4.1' }))?.limits.map((l) => [l.allowed, l.retryAfterMs]), [[false, 250], [true, 0]]);
      // Another limit's longer wait still rules the decision's; a cost above the limit is never (-1), as it was.
      const never = limiter({ limits: { name: 'slots', algorithm: 'concurrency', limit: 2, lease: 30, cost: 3 } });
      assert.deepEqual(await never.check({ ip: '10.0.4.1' }).then((d) => [d?.retryAfterMs, d?.limits[0].retryAfterMs]), [-1, -1]);
      // refund() gives back the other limits' cost only; a concurrency limit is refused by name.
      await first!.refund();
      await assert.rejects(first!.refund({ slots: 1 }), {
        name: 'TypeError',
        message: 'refund(): "slots" is a concurrency limit: its slots come back with release(), not a refund',
      });
      assert.deepEqual((await check.check({ ip: '10.0.4.1' }))?.limits.map((l) => [l.allowed, l.remaining]), [[false, 0], [true, 99]]);
      // release() sends one RL.RELEASE; again, or on a denial, nothing.
      await server.cli('config', 'resetstat');
      await first!.release();
      assert.equal(await releaseCalls(), 1);
      await first!.release();
      await denied!.release();
      assert.equal(await releaseCalls(), 1);
      // The slot is back at once: the 30 s denial was not kept in process.
      const third = await check.check({ ip: '10.0.4.1' });
      assert.deepEqual(third?.limits.map((l) => [l.allowed, l.remaining, l.leaseId]), [[true, 0, 3], [true, 98, undefined]]);
      await Promise.all([second!.release(), third!.release()]);
      assert.equal(await server.cli('exists', 'ratelimit:{ip:10.0.4.1}:slots'), '0'); // the last release deletes the key
    });

    test('concurrency: a lease never released (its limiter gone) runs out; a release that fails is logged, never thrown', async () => {
      const spec = { algorithm: 'concurrency', limit: 1, lease: 0.3 } as const;
      const crashed = createLimiter<Req>({ redis: app.client, mode, limits: spec });
      const held = await crashed.check({ ip: '10.0.4.2' });
      assert.deepEqual(held?.limits.map((l) => [l.key, l.leaseId]), [['ratelimit:{ip:10.0.4.2}:concurrency:1:0.3', 1]]);
      crashed.close();
      const lines: string[] = [];
      const check = limiter({ limits: spec, timeoutMs: 300, log: (line) => lines.push(line) });
      const refused = await check.check({ ip: '10.0.4.2' });
      assert.equal(refused?.allowed, false);
      assert.ok(refused!.retryAfterMs > 0 && refused!.retryAfterMs <= 300, String(refused?.retryAfterMs));
      await sleep(refused!.retryAfterMs + 20);
      const back = await check.check({ ip: '10.0.4.2' });
      assert.deepEqual(back?.limits.map((l) => [l.allowed, l.leaseId]), [[true, 1]]); // the key ran out with its lease: ids start again
      await server.kill();
      try {
        await back!.release();
        assert.equal(lines.length, 1);
        assert.match(lines[0], /^rate limiter release failed: /);
      } finally {
        await server.run();
      }
    });

    test('concurrency: renew() keeps a lease held past its first end; false once released, on a denial or without a lease; rejects with Redis down', async () => {
      const check = limiter({ limits: [{ name: 'slots', algorithm: 'concurrency', limit: 1, lease: 1 }, { name: 'requests', limit: 100, rate: 0.001 }], timeoutMs: 300 });
      const held = await check.check({ ip: '10.0.4.3' });
      assert.deepEqual(held?.limits.map((l) => l.leaseId), [1, undefined]);
      await sleep(600);
      assert.equal(await held!.renew(), true);
      // The lease now runs 1 s from the renewal: more than the 0.4 s left of the first.
      const pttl = Number(await server.cli('pttl', 'ratelimit:{ip:10.0.4.3}:slots'));
      assert.ok(pttl > 800 && pttl <= 1000, String(pttl));
      await sleep(600); // past the first end, before the renewed one
      const denied = await check.check({ ip: '10.0.4.3' });
      assert.deepEqual(denied?.limits.map((l) => [l.allowed, l.remaining]), [[false, 0], [true, 99]]);
      assert.equal(await denied!.renew(), false);
      await held!.release();
      assert.equal(await held!.renew(), false);
      assert.equal(await (await limiter({ limits: { limit: 5, rate: 1 } }).check({ ip: '10.0.4.3' }))!.renew(), false);
      const again = await check.check({ ip: '10.0.4.3' });
      assert.deepEqual(again?.limits.map((l) => l.leaseId), [1, undefined]); // the key went with the last lease: ids start again
      await server.kill();
      try {
        await assert.rejects(again!.renew(), { name: 'RateLimiterUnavailable' });
      } finally {
        await server.run();
      }
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

    test('READONLY, a primary demoted by a failover: Redis unavailable by onUnavailable, one log line, never a server error', async () => {
      await server.cli('config', 'set', 'repl-diskless-sync-delay', '0'); // the replica syncs at once, not after 5 s
      // Script mode: the library is loaded on the primary (FCALL) and replicated with the key.
      assert.equal((await limiter({ limits: { limit: 10, rate: 0.001 } }).check({ ip: '10.0.6.1' }))?.limits[0].remaining, 9);
      const replica = await RedisServer.start(['--replicaof', '127.0.0.1', String(server.port)], withModule);
      const onReplica = await connect(replica);
      const made: { close(): void }[] = [];
      // Three checks on the replica by each policy: each refused or passed, one log line for the first.
      const checks = async (scriptCall: 'auto' | 'evalsha') => {
        const lines: string[] = [];
        for (const onUnavailable of ['closed', 'open'] as const) {
          const check = createLimiter<Req>({ redis: onReplica.client, mode, scriptCall, limits: { limit: 10, rate: 0.001, onUnavailable }, log: (line) => lines.push(line) });
          made.push(check);
          for (let i = 0; i < 3; i++) {
            const decision = check.check({ ip: '10.0.6.1' });
            if (onUnavailable === 'closed') await assert.rejects(decision, RateLimiterUnavailable);
            else assert.equal(await decision, null);
          }
        }
        return lines;
      };
      const refused = (handling: string) => new RegExp(`^rate limiter unavailable: (ERR )?READONLY You can't write against a read only replica\\..* \\(${handling}; Redis is tried again in a second\\)$`);
      try {
        await until('the replica\'s copy of the key', async () => (await replica.cli('dbsize')) === '1');
        // Module mode: RL.MULTI refused. Script mode: FCALL refused, or with EVALSHA (EVAL) the library's write refused.
        for (const scriptCall of mode === 'script' ? (['auto', 'evalsha'] as const) : (['auto'] as const)) {
          const lines = await checks(scriptCall);
          assert.equal(lines.length, 2, lines.join('\n'));
          assert.match(lines[0], refused('refusing it'));
          assert.match(lines[1], refused('letting the request through'));
        }
        if (mode === 'script') {
          // A replica without the library refuses FUNCTION LOAD: EVALSHA there, said once, as before; then the write refused.
          await server.cli('function', 'flush');
          await until('the replica\'s FUNCTION FLUSH', async () => (await replica.cli('function', 'list')) === '');
          const lines = await checks('auto');
          const fellBack = /^rate limiter: script mode calls the Lua library with EVALSHA, not FCALL, where Redis Functions are refused: READONLY You can't write against a read only replica\.$/;
          assert.equal(lines.length, 4, lines.join('\n')); // each limiter's own
          assert.match(lines[0], fellBack);
          assert.match(lines[1], refused('refusing it'));
          assert.match(lines[2], fellBack);
          assert.match(lines[3], refused('letting the request through'));
        }
        assert.equal(await replica.cli('dbsize'), '1');
        assert.equal((await limiter({ limits: { limit: 10, rate: 0.001 } }).check({ ip: '10.0.6.1' }))?.limits[0].remaining, 8); // nothing taken
      } finally {
        for (const check of made) check.close();
        await onReplica.close();
        await replica.stop();
      }
    });

    test('no answer in time: fail open, and the paused call never charges later', async () => {
      const lines: string[] = [];
      const check = limiter({ limits: { limit: 10, rate: 0.001 }, timeoutMs: 200, log: (line) => lines.push(line) });
      await check.check({ ip: '10.0.0.6' }); // connected, 9 left
      await server.cli('client', 'pause', '1000', 'ALL');
      const started = Date.now();
      assert.equal(await check.check({ ip: '10.0.0.6' }), null);
      assert.ok(Date.now() - started < 600);
      assert.deepEqual(lines, ['rate limiter unavailable: no answer from Redis within 200 ms (letting the request through; Redis is tried again in a second)']);
      await sleep(1200); // the pause is over: a command still queued would run now
      const next = await check.check({ ip: '10.0.0.6' });
      assert.equal(next?.limits[0].remaining, 8);
    });

    test('no answer in time, failing closed: RateLimiterUnavailable', async () => {
      const check = limiter({ limits: { limit: 10, rate: 0.001 }, timeoutMs: 200, failOpen: false, log: () => {} });
      await check.check({ ip: '10.0.0.7' });
      await server.cli('client', 'pause', '800', 'ALL');
      await assert.rejects(check.check({ ip: '10.0.0.7' }), RateLimiterUnavailable);
      await sleep(1200); // Redis is tried again a second after the failure (a timer may fire a little early)
      assert.equal((await check.check({ ip: '10.0.0.7' }))?.limits[0].remaining, 8);
    });

    // Closing the connection does not drop a command Redis has read: a busy or stopped Redis still runs it.
    const stalls: [string, () => Promise<() => Promise<void>>][] = [
      ['a script from another client keeps Redis busy for 1.5 s', async () => {
        const { done } = await server.busyFor(1500);
        return async () => void (await done);
      }],
      ['the server is stopped (SIGSTOP) for 1.5 s', async () => {
        server.pause();
        return async () => {
          await sleep(1500);
          server.resume();
        };
      }],
    ];
    for (const [stall, begin] of stalls) {
      test(`a check that timed out never charges later: ${stall}; its late reply is undone at once (window, bucket, lease)`, async () => {
        await server.waitForWindowWith(3600);
        const lines: string[] = [];
        const check = limiter({
          key: () => 'late',
          timeoutMs: 500,
          log: (line) => lines.push(line),
          limits: [
            { name: 'window', algorithm: 'fixedwindow', limit: 10, window: 3600 },
            { name: 'bucket', limit: 10, rate: 0.001 },
            { name: 'slots', algorithm: 'concurrency', limit: 3, lease: 30 },
          ],
        });
        const remaining = (d: Decision | null) => d?.limits.map((l) => [l.name, l.remaining]);
        assert.deepEqual(remaining(await check.check({ ip: '10.0.5.1' })), [['window', 9], ['bucket', 9], ['slots', 2]]);
        const end = await begin();
        const started = performance.now();
        // No answer in 500 ms: the open limits pass, the concurrency limit is held in process (its default, 'local').
        const timedOut = await check.check({ ip: '10.0.5.1' });
        assert.ok(performance.now() - started < 1200);
        assert.deepEqual(remaining(timedOut), [['slots', 2]]);
        assert.deepEqual(lines, ['rate limiter unavailable: no answer from Redis within 500 ms (limiting in process; Redis is tried again in a second)']);
        await timedOut!.release();
        await end();
        await server.cli('ping'); // Redis answers again: the late RL.MULTI has run, and its undo was sent at once
        await sleep(100);
        const state = await server.cli('keys', 'ratelimit:{late}:*');
        assert.deepEqual(state.split('\n').sort(), ['ratelimit:{late}:bucket', 'ratelimit:{late}:slots', 'ratelimit:{late}:window']);
        // As if the timed-out check had never run: the first check's unit and lease only.
        let decision: Decision | null = null;
        for (let i = 0; i < 40 && decision?.limits.length !== 3; i++) {
          if (i > 0) await sleep(100); // Redis is tried again a second after the failure
          decision = await check.check({ ip: '10.0.5.1' });
        }
        assert.deepEqual(remaining(decision), [['window', 8], ['bucket', 8], ['slots', 1]]);
        assert.equal(lines.length, 1);
      });
    }

    test('no reply within LATE (60 s; 0.6 s here): the connection is closed, logged once; what Redis runs after it resumed stays', async () => {
      const saved = LATE.ms;
      LATE.ms = 600;
      const lines: string[] = [];
      const check = limiter({
        key: () => 'given-up',
        timeoutMs: 300,
        log: (line) => lines.push(line),
        limits: { name: 'window', algorithm: 'fixedwindow', limit: 5, window: 1_000_000 },
      });
      try {
        assert.equal((await check.check({ ip: '10.0.6.1' }))?.limits[0].remaining, 4);
        server.pause();
        try {
          assert.equal(await check.check({ ip: '10.0.6.1' }), null); // no answer in 300 ms: fail open
          await until('the late reply given up on', async () => lines.some((line) => line.startsWith('rate limiter: no reply within')), 5000);
        } finally {
          server.resume();
        }
        // Redis, resumed, runs the command it had read: unrefunded, 3 left; this check takes one more.
        let decision: Decision | null = null;
        for (let i = 0; i < 40 && decision === null; i++) {
          if (i > 0) await sleep(100); // Redis is tried again a second after the failure
          decision = await check.check({ ip: '10.0.6.1' });
        }
        assert.equal(decision?.limits[0].remaining, 2);
        assert.deepEqual(lines.filter((line) => line.startsWith('rate limiter: no reply within')), [gaveUp(600)]);
        assert.equal(gaveUp(600), "rate limiter: no reply within 0.6 s to a check that timed out: its connection closed (if it ever runs, what it takes stays until the limits' own expiry)");
      } finally {
        LATE.ms = saved;
        check.close();
      }
    });

    test('after a timeout the next calls go on a new connection; the timed-out one is closed once its late reply is read and undone; close() leaves none', async () => {
      // The ids of the limiter's connections: those that were not there before it (the app's, other tests' limiters).
      const ids = async () => [...(await server.cli('client', 'list')).matchAll(/^id=(\d+) .* cmd=(\S+)/gm)].filter(([, , cmd]) => cmd !== 'client|list').map(([, id]) => id);
      const others = new Set(await ids());
      const ours = async () => (await ids()).filter((id) => !others.has(id));
      const check = limiter({ key: () => 'fresh', timeoutMs: 300, limits: { limit: 10, rate: 0.001 }, log: () => {} });
      assert.equal((await check.check({ ip: '10.0.7.1' }))?.limits[0].remaining, 9);
      const first = await ours();
      assert.equal(first.length, 1);
      const { done } = await server.busyFor(1500);
      assert.equal(await check.check({ ip: '10.0.7.1' }), null); // no answer in 300 ms
      await sleep(1000); // the probe is due: on a new connection, not behind the late reply
      const probe = await check.check({ ip: '10.0.7.1' }); // null when it timed out too on this machine
      await done;
      // The timed-out connection closed; one open at most (the probe's, or the one the probe's late undo opened).
      await until('the timed-out connection closed, at most one open', async () => {
        const now = await ours();
        return !now.includes(first[0]) && now.length <= 1;
      }, 5000);
      // The late check undone: the first check's unit and the probe's only, then this one's.
      assert.equal((await check.check({ ip: '10.0.7.1' }))?.limits[0].remaining, probe === null ? 8 : 7);
      // close() closes them all, a connection still waiting for a late reply among them.
      const { done: again } = await server.busyFor(1000);
      assert.equal(await check.check({ ip: '10.0.7.2' }), null);
      check.close();
      await again;
      await until('no connection of the limiter open', async () => (await ours()).length === 0, 5000);
    });

    test('Redis stopped: a refused connection fails at once, Redis is tried at most once a second, limiting resumes within a second of its return', async () => {
      const lines: string[] = [];
      const check = limiter({ limits: { limit: 10, rate: 0.001 }, timeoutMs: 5000, log: (line) => lines.push(line) });
      const closed = limiter({ limits: { name: 'closed', limit: 10, rate: 0.001 }, timeoutMs: 5000, onUnavailable: 'closed', log: () => {} });
      assert.equal((await check.check({ ip: '10.0.3.1' }))?.limits[0].remaining, 9);
      assert.equal((await closed.check({ ip: '10.0.3.1' }))?.limits[0].remaining, 9);
      await server.kill();
      let started = performance.now();
      assert.equal(await check.check({ ip: '10.0.3.1' }), null);
      await assert.rejects(closed.check({ ip: '10.0.3.1' }), RateLimiterUnavailable);
      assert.ok(performance.now() - started < 2500, 'no wait for the 5 s timeout');
      // Three seconds of requests: each answered by the policy; Redis tried about once a second (a log line each).
      lines.length = 0;
      started = performance.now();
      let answered = 0;
      while (performance.now() - started < 3000) {
        assert.equal(await check.check({ ip: '10.0.3.2' }), null);
        answered++;
        await sleep(10);
      }
      assert.ok(answered > 50);
      assert.ok(lines.length >= 2 && lines.length <= 4, `${lines.length} probes in 3 s`);
      await server.run();
      started = performance.now();
      let decision = null;
      while (decision === null) {
        decision = await check.check({ ip: '10.0.3.3' });
        if (decision === null) await sleep(10);
      }
      assert.ok(performance.now() - started < 2000, 'limiting resumes within about a second');
      assert.equal(decision.limits[0].remaining, 9);
    });

    test('Redis restarts: calls made while it is down are not replayed', async () => {
      const lines: string[] = [];
      const check = limiter({ limits: { limit: 10, rate: 0.001 }, timeoutMs: 300, log: (line) => lines.push(line) });
      assert.equal((await check.check({ ip: '10.0.0.8' }))?.limits[0].remaining, 9);
      await server.kill();
      for (let i = 0; i < 3; i++) assert.equal(await check.check({ ip: '10.0.0.9' }), null);
      assert.equal(lines.length, 1); // the failed call; the two after it did not call Redis
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
