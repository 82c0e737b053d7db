// Concurrency scenarios over real HTTP, run by the Express and the Fastify
// tests on their own apps. concurrencyOverHttp: each app serves, behind a
// concurrency limit "slots" (2 at once, lease 30 s, per client address):
//   /slow   waits for the gate, then answers 200
//   /fast   answers 200
//   /boom   throws (the framework answers 500)
//   /short  also behind "short" (1 at once, lease 0.5 s), checked with "slots" in one call
// abortingClients: each app serves /busy behind BUSY (3 at once), a
// handler of 100 ms that a Handlers counts while it runs.

import assert from 'node:assert/strict';

import { createLimiter, DEFAULT_MESSAGE, type Mode } from '../src/index.js';
import { fields } from './responses.js';
import type { RedisServer } from './servers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const SLOTS = { name: 'slots', algorithm: 'concurrency', limit: 2, lease: 30 } as const;
export const SHORT = { name: 'short', algorithm: 'concurrency', limit: 1, lease: 0.5 } as const;
// Closed while Redis cannot answer (a slow call on a loaded machine): in-process slots would come on top of Redis's.
export const BUSY = { name: 'busy', algorithm: 'concurrency', limit: 3, lease: 30, onUnavailable: 'closed' } as const;

/** Counts the handlers running at once, and the most there ever were. */
export class Handlers {
  running = 0;
  most = 0;
  ended = 0;

  /** A handler of 100 ms: counted from its start until just before it answers. */
  async work(): Promise<void> {
    this.most = Math.max(this.most, ++this.running);
    await sleep(100);
    this.running--;
    this.ended++;
  }
}

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
  // Slots free as requests end: Retry-After is the limit's retryAfter hint (1 s by default), never the 30 s lease.
  const denied = await fetch(`${url}/fast`);
  assert.deepEqual(fields(denied), { status: 429, policy, limit: '"slots";r=0;t=1', retryAfter: '1' });
  assert.deepEqual(await denied.json(), { error: 'rate_limit_exceeded', message: DEFAULT_MESSAGE, retry_after_seconds: 1 });
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

  // A client that leaves while its handler waits: the slot stays held while the handler runs, back when it ends.
  const leaving = new AbortController();
  const gone = fetch(`${url}/slow`, { signal: leaving.signal }).catch((error: Error) => error.name);
  await gate.until(3);
  leaving.abort();
  assert.equal(await gone, 'AbortError');
  await sleep(200); // the disconnect has reached the server
  for (let i = 0; i < 2; i++) {
    const whileRunning = await fetch(`${url}/fast`);
    assert.deepEqual(fields(whileRunning), { status: 200, policy, limit: '"slots";r=0;t=30', retryAfter: null });
    await sleep(100); // /fast's slot back
  }
  gate.open();
  await released(server, key); // the handler ended: its slot back

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

/**
 * Ten clients that give up after 40 ms on /busy (a 100 ms handler behind
 * BUSY, 3 at once) for 1.5 s: never more than 3 handlers run at once,
 * whatever the clients do, and once the handlers have ended every slot is
 * back (the last release deletes the key).
 */
export async function abortingClients({ url, server, handlers }: { url: string; server: RedisServer; handlers: Handlers }) {
  const seen = { admitted: 0, denied: 0, aborted: 0 };
  const until = performance.now() + 1500;
  const client = async () => {
    while (performance.now() < until) {
      try {
        const res = await fetch(`${url}/busy`, { signal: AbortSignal.timeout(40) });
        await res.arrayBuffer();
        seen[res.status === 429 ? 'denied' : 'admitted']++;
      } catch {
        seen.aborted++;
      }
    }
  };
  await Promise.all(Array.from({ length: 10 }, client));
  // Once every handler has ended (a request the server still decides may start one more), every slot is back.
  for (let i = 0; handlers.running > 0 || (await server.cli('exists', 'ratelimit:{ip:127.0.0.1}:busy')) !== '0'; i++) {
    if (i > 300) assert.fail(`${handlers.running} handlers running, slots still held`);
    await sleep(10);
  }
  // The limit was reached (the test could fail), and never passed.
  assert.equal(handlers.most, 3, JSON.stringify({ ...seen, most: handlers.most }));
  assert.ok(seen.aborted > 10 && handlers.ended > 10, JSON.stringify({ ...seen, ended: handlers.ended }));
}
