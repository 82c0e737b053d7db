// Misconfiguration throws when the limiter or middleware is created, and
// the message names the option. No Redis call is made for these.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { createCluster as createCluster4 } from 'redis4';

import { createLimiter, fastifyRateLimit, rateLimit, RateLimitConfigError, type Limit } from '../src/index.js';

const redis = createClient(); // never connected: nothing here reaches Redis

function refuses(limits: unknown, message: string) {
  assert.throws(
    () => createLimiter({ redis, limits: limits as Limit }),
    (error: unknown) => error instanceof RateLimitConfigError && error.message === message,
  );
}

test('the issue\'s examples: each throws naming the option', () => {
  refuses({ limit: 60 }, 'limits.rate: required for tokenbucket (units per second)');
  refuses({ limit: 0, rate: 1 }, 'limits.limit: must be an integer from 1 to 9007199254740991 (got 0)');
  refuses({ limit: 2.5, rate: 1 }, 'limits.limit: must be an integer from 1 to 9007199254740991 (got 2.5)');
  refuses({ algorithm: 'fixedwindow', limit: 10, rate: 1 }, 'limits.rate: fixedwindow takes a window (seconds), not a rate');
});

test('every other option of a limit', () => {
  refuses({ algorithm: 'slidingwindow', limit: 10 }, 'limits.window: required for slidingwindow (seconds)');
  refuses({ algorithm: 'leakybucket', limit: 10, rate: 1, window: 60 }, 'limits.window: leakybucket takes a rate (units per second), not a window');
  refuses({ algorithm: 'gcra', limit: 10, rate: 1 }, 'limits.algorithm: must be one of tokenbucket, leakybucket, fixedwindow, slidingwindow, slidinglog, concurrency (got gcra)');
  refuses({ algorithm: 'TOKENBUCKET', limit: 10, rate: 1 }, 'limits.algorithm: must be one of tokenbucket, leakybucket, fixedwindow, slidingwindow, slidinglog, concurrency (got TOKENBUCKET)');
  refuses({ limit: 2 ** 53, rate: 1 }, 'limits.limit: must be an integer from 1 to 9007199254740991 (got 9007199254740992)');
  refuses({ limit: '10', rate: 1 }, 'limits.limit: must be an integer from 1 to 9007199254740991 (got 10)');
  refuses({ limit: 10, rate: 0 }, 'limits.rate: must be a number from 0.000001 to 1000000000000 (got 0)');
  refuses({ limit: 10, rate: Infinity }, 'limits.rate: must be a number from 0.000001 to 1000000000000 (got Infinity)');
  refuses({ limit: 2 ** 50, rate: 0.0001 }, 'limits.rate: limit / rate must be at most 1e12 seconds');
  refuses({ algorithm: 'slidinglog', limit: 10, window: 0.0001 }, 'limits.window: must be a number from 0.001 to 1000000000000 (got 0.0001)');
  refuses({ limit: 10, rate: 1, cost: 2.5 }, 'limits.cost: must be an integer from 0 to 9007199254740991 (got 2.5)');
  refuses({ limit: 10, rate: 1, cost: -1 }, 'limits.cost: must be an integer from 0 to 9007199254740991 (got -1)');
  refuses({ limit: 10, rate: 1, key: 'user' }, 'limits.key: must be a function (got string)');
  refuses({ limit: 10, rate: 1, quotaUnit: 'tokens' }, 'limits.quotaUnit: must be one of requests, content-bytes, concurrent-requests');
  refuses({ limit: 10, rate: 1, windw: 60 }, 'limits.windw: unknown option');
  refuses([], 'limits: needs at least one limit');
  refuses(60, 'limits: must be an object such as { limit: 60, rate: 1 }');
});

test('a concurrency limit: a lease in seconds, no rate or window; a lease on another algorithm is refused', () => {
  refuses({ algorithm: 'concurrency', limit: 10 }, 'limits.lease: required for concurrency (seconds a slot is held unless released)');
  refuses({ algorithm: 'concurrency', limit: 10, rate: 1 }, 'limits.rate: concurrency takes a lease (seconds a slot is held unless released), not a rate');
  refuses({ algorithm: 'concurrency', limit: 10, window: 30 }, 'limits.window: concurrency takes a lease (seconds a slot is held unless released), not a window');
  refuses({ algorithm: 'concurrency', limit: 10, lease: 0.0001 }, 'limits.lease: must be a number from 0.001 to 1000000000000 (got 0.0001)');
  refuses({ algorithm: 'concurrency', limit: 10, lease: 1e13 }, 'limits.lease: must be a number from 0.001 to 1000000000000 (got 10000000000000)');
  refuses({ algorithm: 'concurrency', limit: 0, lease: 30 }, 'limits.limit: must be an integer from 1 to 9007199254740991 (got 0)');
  refuses({ algorithm: 'concurrency', limit: 10, lease: 30, quotaUnit: 'requests' }, 'limits.quotaUnit: a concurrency limit counts concurrent-requests');
  refuses({ limit: 10, rate: 1, lease: 30 }, 'limits.lease: tokenbucket takes a rate (units per second), not a lease');
  refuses({ algorithm: 'fixedwindow', limit: 10, window: 60, lease: 30 }, 'limits.lease: fixedwindow takes a window (seconds), not a lease');
  const [slots] = createLimiter({ redis, limits: { algorithm: 'concurrency', limit: 10, lease: 30 } }).limits;
  assert.deepEqual([slots.algorithm, slots.param, slots.cost, slots.quotaUnit], ['concurrency', 30, 1, 'concurrent-requests']);
});

test('per limit: onUnavailable (the limiter\'s by default, local for a concurrency limit) and a concurrency limit\'s retryAfter hint', () => {
  refuses({ limit: 10, rate: 1, onUnavailable: 'pass' }, "limits.onUnavailable: must be 'open', 'closed' or 'local' (got pass)");
  refuses([{ name: 'a', limit: 10, rate: 1 }, { name: 'b', limit: 10, rate: 1, onUnavailable: true }], "limits[1].onUnavailable: must be 'open', 'closed' or 'local' (got true)");
  refuses({ limit: 10, rate: 1, retryAfter: 1 }, 'limits.retryAfter: only a concurrency limit takes a retryAfter hint (tokenbucket has its own retry time)');
  refuses({ algorithm: 'slidinglog', limit: 10, window: 60, retryAfter: 1 }, 'limits.retryAfter: only a concurrency limit takes a retryAfter hint (slidinglog has its own retry time)');
  refuses({ algorithm: 'concurrency', limit: 10, lease: 30, retryAfter: 0 }, 'limits.retryAfter: must be a number from 0.001 to 1000000000000 (got 0)');
  refuses({ algorithm: 'concurrency', limit: 10, lease: 30, retryAfter: '1' }, 'limits.retryAfter: must be a number from 0.001 to 1000000000000 (got 1)');
  const slots = { name: 'slots', algorithm: 'concurrency', limit: 10, lease: 30 } as const;
  const bucket = { name: 'bucket', limit: 10, rate: 1 };
  const resolved = (options: object, limits: Limit[]) =>
    createLimiter({ redis, limits, ...options }).limits.map((l) => [l.name, l.onUnavailable, l.retryAfterMs]);
  assert.deepEqual(resolved({}, [bucket, slots]), [['bucket', 'open', undefined], ['slots', 'local', 1000]]);
  assert.deepEqual(resolved({ failOpen: false }, [bucket, slots]), [['bucket', 'closed', undefined], ['slots', 'local', 1000]]);
  assert.deepEqual(resolved({ onUnavailable: 'local' }, [{ ...bucket, onUnavailable: 'open' }, { ...slots, onUnavailable: 'closed', retryAfter: 0.0015 }]), [
    ['bucket', 'open', undefined],
    ['slots', 'closed', 2],
  ]);
  // A route's limits stacked with with() take the limiter's policy too.
  const app = createLimiter({ redis, limits: bucket, onUnavailable: 'closed' });
  assert.deepEqual(app.with([slots, { name: 'route', limit: 1, rate: 1 }]).limits.map((l) => [l.name, l.onUnavailable]), [
    ['bucket', 'closed'],
    ['slots', 'local'],
    ['route', 'closed'],
  ]);
});

test('policy names: printable ASCII, unique, required when there are several', () => {
  refuses({ limit: 10, rate: 1, name: 'café' }, 'limits.name: must be printable ASCII, no control characters (got "café")');
  refuses({ limit: 10, rate: 1, name: 'a\nb' }, 'limits.name: must be printable ASCII, no control characters (got "a\\nb")');
  refuses({ limit: 10, rate: 1, name: '' }, 'limits.name: must be a string of 1 to 64 characters');
  refuses([{ limit: 10, rate: 1, name: 'burst' }, { limit: 10, rate: 1 }], 'limits[1].name: required when a request carries more than one limit');
  refuses(
    [{ limit: 10, rate: 1, name: 'burst' }, { algorithm: 'fixedwindow', limit: 1000, window: 86400, name: 'burst' }],
    'limits[1].name: duplicate policy name "burst"',
  );
  const app = createLimiter({ redis, limits: { limit: 10, rate: 1, name: 'app' } });
  assert.throws(() => app.with({ limit: 1, rate: 1, name: 'app' }), /^RateLimitConfigError: limits.name: duplicate policy name "app"$/);
  assert.throws(() => app.with({ limit: 1, rate: 1 }), /^RateLimitConfigError: limits.name: required when a request carries more than one limit$/);
  assert.deepEqual(app.with({ limit: 1, rate: 1, name: 'search' }).limits.map((l) => l.name), ['app', 'search']);
  assert.deepEqual(createLimiter({ redis, limits: { limit: 10, rate: 1 } }).limits.map((l) => l.name), ['default']);
});

test('limiter options', () => {
  const limits = { limit: 10, rate: 1 };
  const cases: [Record<string, unknown>, string][] = [
    [{ redis: {}, limits }, 'redis: must be a node-redis client or cluster (createClient/createCluster) or an ioredis Redis or Cluster'],
    [{ redis: undefined, limits }, 'redis: must be a node-redis client or cluster (createClient/createCluster) or an ioredis Redis or Cluster'],
    [{ redis }, 'limits: required, e.g. { limit: 60, rate: 1 }'],
    [{ redis, limit: limits }, 'limit: unknown option'],
    [{ redis, limits, prefix: 'rl:{app}:' }, 'prefix: must be a string without { or } (the key adds its own hash tag)'],
    [{ redis, limits, timeoutMs: 0 }, 'timeoutMs: must be a positive number of milliseconds (got 0)'],
    [{ redis, limits, failOpen: 'no' }, 'failOpen: must be true or false'],
    [{ redis, limits, onUnavailable: 'pass' }, "onUnavailable: must be 'open', 'closed' or 'local' (got pass)"],
    [{ redis, limits, onUnavailable: 'Local' }, "onUnavailable: must be 'open', 'closed' or 'local' (got Local)"],
    [{ redis, limits, onUnavailable: 'open', failOpen: true }, 'failOpen: give onUnavailable or failOpen (its older form), not both'],
    [{ redis, limits, onUnavailable: 'local', failOpen: false }, 'failOpen: give onUnavailable or failOpen (its older form), not both'],
    [{ redis, limits, onUnavailable: 'local', instances: 0 }, 'instances: must be an integer from 1 to 9007199254740991 (got 0)'],
    [{ redis, limits, onUnavailable: 'local', instances: 2.5 }, 'instances: must be an integer from 1 to 9007199254740991 (got 2.5)'],
    [{ redis, limits, onUnavailable: 'local', instances: '2' }, 'instances: must be an integer from 1 to 9007199254740991 (got 2)'],
    [{ redis, limits, instances: true }, 'instances: must be an integer from 1 to 9007199254740991 (got true)'],
    [{ redis, limits, denialCache: -1 }, 'denialCache: must be an integer from 0 to 9007199254740991 (got -1)'],
    [{ redis, limits, mode: 'lua' }, "mode: must be 'auto', 'module' or 'script' (got lua)"],
    [{ redis, limits, mode: 'Module' }, "mode: must be 'auto', 'module' or 'script' (got Module)"],
    [{ redis, limits, scriptCall: 'eval' }, "scriptCall: must be 'auto', 'fcall' or 'evalsha' (got eval)"],
    [{ redis, limits, scriptCall: 'FCALL' }, "scriptCall: must be 'auto', 'fcall' or 'evalsha' (got FCALL)"],
    [{ redis, limits, ipv6Subnet: 129 }, 'ipv6Subnet: must be an integer from 1 to 128, or false'],
    [{ redis, limits, key: 'ip' }, 'key: must be a function (got string)'],
  ];
  for (const [options, message] of cases) {
    assert.throws(() => createLimiter(options as never), (error: unknown) => (error as Error).message === message, message);
  }
  assert.doesNotThrow(() => createLimiter({ redis: new Redis({ lazyConnect: true }), limits }));
  // The policy as it stands: onUnavailable, or failOpen's, 'open' by default; instances 1 by default.
  const policy = (options: object) => {
    const limiter = createLimiter({ redis, limits, ...options });
    return [limiter.onUnavailable, limiter.instances];
  };
  assert.deepEqual(
    [policy({}), policy({ onUnavailable: 'local' }), policy({ onUnavailable: 'local', instances: 4 }), policy({ failOpen: false }), policy({ failOpen: true }), policy({ onUnavailable: 'closed' })],
    [['open', 1], ['local', 1], ['local', 4], ['closed', 1], ['open', 1], ['closed', 1]],
  );
  assert.throws(
    () => createLimiter({ redis: createCluster4({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] }), limits }),
    /^RateLimitConfigError: redis: a node-redis v4 cluster cannot be used: upgrade to node-redis v5 or later, or pass an ioredis Cluster$/,
  );
});

test('middleware options', () => {
  const limits = { limit: 10, rate: 1 };
  const cases: [Record<string, unknown>, string][] = [
    [{ redis, limits, statusCode: 200 }, 'statusCode: must be an HTTP error status 400..599 (got 200)'],
    [{ redis, limits, skip: true }, 'skip: must be a function (got boolean)'],
    [{ redis, limits, handler: 'deny' }, 'handler: must be a function (got string)'],
    [{ redis, limits, message: 42 }, 'message: must be a string'],
    [{ redis, limits, skipFailedRequests: 'yes' }, 'skipFailedRequests: must be true or false'],
    [{ redis, limits, throttle: 1 }, 'throttle: must be true or false'],
    [{ redis, limits, headers: 'draft' }, "headers: must be true, 'draft-10', 'draft-6', 'legacy' or false (got draft)"],
    [{ redis, limits, headers: 'draft-7' }, "headers: must be true, 'draft-10', 'draft-6', 'legacy' or false (got draft-7)"],
    [{ redis, limits, headers: 'Legacy' }, "headers: must be true, 'draft-10', 'draft-6', 'legacy' or false (got Legacy)"],
    [{ redis, limits, legacyHeaders: true }, 'legacyHeaders: unknown option'],
  ];
  for (const [options, message] of cases) {
    assert.throws(() => rateLimit(options as never), (error: unknown) => (error as Error).message === message, message);
    let failed: Error | undefined;
    fastifyRateLimit({ addHook() {} }, options as never, (error) => (failed = error));
    assert.equal(failed?.message, message);
  }
});
