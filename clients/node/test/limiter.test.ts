// checkRateLimit against a real server, for each of the five algorithms.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { createClient } from 'redis';

import { checkRateLimit, commandFor } from '../src/index.js';
import { RedisServer } from './server.js';

let server: RedisServer;
let redis: ReturnType<typeof createClient>;

before(async () => {
  server = await RedisServer.start();
  redis = createClient({ url: server.url });
  await redis.connect();
});

after(async () => {
  redis.destroy();
  await server.stop();
});

test('commands carry the options in the module syntax', () => {
  assert.deepEqual(commandFor('k', { limit: 10, rate: 0.5 }), ['RL.TOKENBUCKET', 'k', '10', '0.5', '*', '1']);
  assert.deepEqual(
    commandFor('k', { algorithm: 'slidinglog', limit: 5, window: 60, now: 1700000000.25, cost: 2 }),
    ['RL.SLIDINGLOG', 'k', '5', '60', '1700000000.25', '2'],
  );
  assert.throws(() => commandFor('k', { algorithm: 'fixedwindow', limit: 5 }), /positive window/);
});

test('token bucket decisions', async () => {
  const options = { limit: 10, rate: 1, now: 1000 };
  const first = await checkRateLimit('tb', { ...options, redis });
  assert.deepEqual(first, {
    allowed: true, remaining: 9, limit: 10, retryAfterMs: 0, resetAfterMs: 1000,
    policy: { name: 'default', quota: 10, windowSeconds: 10 },
  });
  const drained = await checkRateLimit('tb', { ...options, cost: 9, redis });
  assert.equal(drained.remaining, 0);
  const denied = await checkRateLimit('tb', { ...options, now: 1000.25, redis });
  assert.deepEqual([denied.allowed, denied.retryAfterMs, denied.resetAfterMs], [false, 750, 9750]);
  assert.equal(await redis.pTTL('ratelimit:tb') > 9000, true);
});

test('leaky bucket paces with a delay', async () => {
  const options = { algorithm: 'leakybucket' as const, limit: 3, rate: 2, now: 1000 };
  assert.equal((await checkRateLimit('lb', { ...options, redis })).delayMs, 0);
  const second = await checkRateLimit('lb', { ...options, redis });
  assert.deepEqual([second.allowed, second.remaining, second.delayMs], [true, 1, 500]);
  assert.equal(second.policy.windowSeconds, 2);
});

test('window algorithms', async () => {
  for (const algorithm of ['fixedwindow', 'slidingwindow', 'slidinglog'] as const) {
    const options = { algorithm, limit: 2, window: 60, now: 1700000040 };
    assert.equal((await checkRateLimit(algorithm, { ...options, cost: 2, redis })).allowed, true);
    const denied = await checkRateLimit(algorithm, { ...options, redis });
    assert.equal(denied.allowed, false, algorithm);
    assert.equal(denied.limit, 2);
    assert.deepEqual(denied.policy, { name: 'default', quota: 2, windowSeconds: 60 });
  }
});

test('bad options are the module errors', async () => {
  await assert.rejects(checkRateLimit('bad', { limit: 0, rate: 1, redis }), /capacity must be an integer/);
});
