// One concurrency scenario over real HTTP, run by the Express and the
// Fastify tests on their own apps. Each app serves, behind a concurrency
// limit "slots" (2 at once, lease 30 s, per client address):
//   /slow   waits for the gate, then answers 200
//   /fast   answers 200
//   /boom   throws (the framework answers 500)
//   /short  also behind "short" (1 at once, lease 0.5 s), checked with "slots" in one call

import assert from 'node:assert/strict';

import { createLimiter, DEFAULT_MESSAGE, type Mode } from '../src/index.js';
import { fields } from './responses.js';
import type { RedisServer } from './servers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const SLOTS = { name: 'slots', algorithm: 'concurrency', limit: 2, lease: 30 } as const;
export const SHORT = { name: 'short', algorithm: 'concurrency', limit: 1, lease: 0.5 } as const;

/** Holds /slow's handlers until opened. */
export class Gate {
  entered = 0;
  private waiting: (() => void)[] = [];

  /** A handler waits here. */
  pass(): Promise<void> {
    this.entered++;
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Lets every waiting handler go on. */
  open() {
    for (const resolve of this.waiting.splice(0)) resolve();
  }

  async until(entered: number) {
    for (let i = 0; this.entered < entered; i++) {
      if (i > 400) throw new Error(`${this.entered} of ${entered} handlers entered`);
      await sleep(5);
    }
  }
}

/** Waits (2 s at most, far less than the 30 s lease) for every slot to be released: the last release deletes the key. */
async function released(server: RedisServer, key: string) {
  for (let i = 0; (await server.cli('exists', key)) !== '0'; i++) {
    if (i > 200) assert.fail(`${key} still holds a lease`);
    await sleep(10);
  }
}

export async function concurrencyOverHttp({ url, server, redis, mode, gate }: { url: string; server: RedisServer; redis: unknown; mode: Mode; gate: Gate }) {
  const key = 'ratelimit:{ip:127.0.0.1}:slots';
  const policy = '"slots";q=2;qu="concurrent-requests"';

  // Two slow requests hold both slots while their handlers wait: the third is refused.
  const slow = [fetch(`${url}/slow`), fetch(`${url}/slow`)];
  await gate.until(2);
  const denied = await fetch(`${url}/fast`);
  assert.deepEqual(fields(denied), { status: 429, policy, limit: '"slots";r=0;t=30', retryAfter: '30' });
  assert.deepEqual(await denied.json(), { error: 'rate_limit_exceeded', message: DEFAULT_MESSAGE, retry_after_seconds: 30 });
  gate.open();
  const answered = await Promise.all(slow);
  assert.deepEqual(answered.map((res) => [res.status, res.headers.get('ratelimit-policy'), res.headers.get('ratelimit')]).sort(), [
    [200, policy, '"slots";r=0;t=30'],
    [200, policy, '"slots";r=1;t=30'],
  ]);

  // Released when the responses were sent; the next request gets a slot at once (a denial is never cached).
  await released(server, key);
  const fast = await fetch(`${url}/fast`);
  assert.deepEqual(fields(fast), { status: 200, policy, limit: '"slots";r=1;t=30', retryAfter: null });
  await released(server, key);

  // A handler that throws: the error answered, the slot back.
  const boom = await fetch(`${url}/boom`);
  assert.deepEqual([boom.status, boom.headers.get('ratelimit')], [500, '"slots";r=1;t=30']);
  await released(server, key);

  // A client that leaves while its handler waits: the slot back at the disconnect, not after the lease.
  const leaving = new AbortController();
  const gone = fetch(`${url}/slow`, { signal: leaving.signal }).catch((error: Error) => error.name);
  await gate.until(3);
  assert.equal(await server.cli('exists', key), '1');
  leaving.abort();
  assert.equal(await gone, 'AbortError');
  await released(server, key);
  gate.open();

  // A crashed holder: a lease taken by a limiter that is gone, never released, comes back when it runs out.
  const holder = createLimiter({ redis, mode, key: () => 'ip:127.0.0.1', limits: SHORT });
  assert.equal((await holder.check({}))?.limits[0].leaseId, 1);
  holder.close();
  const shortPolicy = `${policy}, "short";q=1;qu="concurrent-requests"`;
  const held = await fetch(`${url}/short`);
  // All or nothing: "slots" took nothing either (no lease left: no t).
  assert.deepEqual(fields(held), { status: 429, policy: shortPolicy, limit: '"slots";r=2, "short";r=0;t=1', retryAfter: '1' });
  await sleep(600);
  const back = await fetch(`${url}/short`);
  assert.deepEqual(fields(back), { status: 200, policy: shortPolicy, limit: '"slots";r=1;t=30, "short";r=0;t=1', retryAfter: null });
  await released(server, key);
  await released(server, 'ratelimit:{ip:127.0.0.1}:short');
}
