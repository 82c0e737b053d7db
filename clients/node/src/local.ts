// The module's math in process, for onUnavailable 'local': the five
// algorithms and the concurrency limit of src/algorithms/*.rs, in BigInt
// (a bucket's tokens are pico-units, 10^12 a unit; time is microseconds;
// both pass 2^53), so every reply is the module's, field for field.
// `multi` answers what RL.MULTI would, `release` and `renew` what
// RL.RELEASE and RL.RENEW would; the state lives in a Map (least recently
// used out) instead of Redis.

import type { Algorithm } from './options.js';

/** An algorithm of RL.MULTI's limit specs, lower case. */
export type LocalAlgorithm = Algorithm | 'concurrency';

/** One limit of a call: `ALGORITHM size param n`, `param` as the module takes it (a decimal text). */
export interface LocalSpec {
  algorithm: LocalAlgorithm;
  size: number;
  param: string;
  n: number;
}

/** RL.MULTI's reply: allowed, retry_after_ms, then each limit's fields (5, or 6 with delay_ms or lease_id). */
export type MultiReply = [number, number, ...number[][]];

const PICO = 10n ** 12n;
const MAX_ID = 2n ** 53n - 1n;

/** The module's WRONGTYPE, for a key that holds another algorithm's state. */
export const WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value';

interface Bucket { level: bigint; last: bigint } // tokens (token bucket) or queued units (leaky bucket), in pico-units
interface Window { last: bigint; previous: bigint; current: bigint } // the fixed window keeps previous 0
interface Log { runs: [at: bigint, count: bigint][] } // oldest first
interface Lease { id: bigint; expires: bigint; n: bigint }
interface Leases { last: bigint; nextId: bigint; held: Lease[] }
type State = Bucket | Window | Log | Leases;

/** A limit's answer: its reply fields, and the state to store if the call goes on (undefined: keep). */
interface Verdict {
  fields: bigint[];
  store?: State | undefined;
}

const max = (a: bigint, b: bigint) => (a > b ? a : b);
const min = (a: bigint, b: bigint) => (a < b ? a : b);
const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b;
const msBetween = (from: bigint, to: bigint) => ceilDiv(max(0n, to - from), 1000n);
const windowStart = (time: bigint, window: bigint) => time - (time % window);

const never = (remaining: bigint, size: bigint, reset: bigint): Verdict => ({ fields: [0n, remaining, size, -1n, reset] });
const denied = (remaining: bigint, size: bigint, retry: bigint, reset: bigint): Verdict => ({ fields: [0n, remaining, size, retry, reset] });
const admitted = (remaining: bigint, size: bigint, reset: bigint, n: bigint, store: State): Verdict => ({
  fields: [1n, remaining, size, 0n, reset],
  store: n > 0n ? store : undefined,
});

/** A decimal (`12`, `0.5`, `.25`) in millionths, rounded half up at the seventh decimal, as the module reads it. */
export function micros(text: string): bigint {
  const match = /^(\d*)(?:\.(\d*))?$/.exec(text);
  if (!match || text === '' || text === '.') throw new RangeError(`not a decimal: ${JSON.stringify(text)}`);
  const [, whole, fraction = ''] = match;
  const rounded = fraction.length > 6 && fraction[6] >= '5' ? 1n : 0n;
  return BigInt(whole || '0') * 1_000_000n + BigInt(fraction.slice(0, 6).padEnd(6, '0')) + rounded;
}

/** Millionths as a decimal text (`500000n` is `0.5`), as the module takes a rate. */
function decimalOf(millionths: bigint): string {
  const fraction = String(millionths % 1_000_000n).padStart(6, '0').replace(/0+$/, '');
  return fraction === '' ? String(millionths / 1_000_000n) : `${millionths / 1_000_000n}.${fraction}`;
}

/**
 * One process's share of a limit when `instances` processes share it:
 * the size (capacity, window limit, slots) `floor(size / instances)`, at
 * least 1; a bucket's rate `rate / instances` rounded down to six
 * decimals, at least 0.000001; a window and a lease as they are.
 */
export function share(spec: LocalSpec, instances: number): LocalSpec {
  const size = Math.max(1, Number(BigInt(spec.size) / BigInt(instances))); // exact above 2^52 too
  if (spec.algorithm !== 'tokenbucket' && spec.algorithm !== 'leakybucket') return { ...spec, size };
  const rate = micros(spec.param) / BigInt(instances);
  return { ...spec, size, param: decimalOf(rate > 0n ? rate : 1n) };
}

/** Token bucket: tokens(t) = min(capacity, tokens + (t - last) * rate); a new key starts full. */
function tokenBucket(stored: Bucket | undefined, now: bigint, capacity: bigint, refill: bigint, n: bigint): Verdict {
  const full = capacity * PICO;
  const last = stored ? max(now, stored.last) : now;
  const tokens = stored ? min(full, stored.level + (last - stored.last) * refill) : full;
  const ms = (pico: bigint) => ceilDiv(pico, refill * 1000n);
  if (n > capacity) return never(tokens / PICO, capacity, ms(full - tokens));
  const wanted = n * PICO;
  if (tokens < wanted) return denied(tokens / PICO, capacity, ms(wanted - tokens), ms(full - tokens));
  const left = tokens - wanted;
  return admitted(left / PICO, capacity, ms(full - left), n, { level: left, last });
}

/** Leaky bucket: level(t) = max(0, level - (t - last) * rate); admit when level + n <= capacity. A sixth field, delay_ms. */
function leakyBucket(stored: Bucket | undefined, now: bigint, capacity: bigint, refill: bigint, n: bigint): Verdict {
  const full = capacity * PICO;
  const last = stored ? max(now, stored.last) : now;
  const level = stored ? max(0n, stored.level - (last - stored.last) * refill) : 0n;
  const ms = (pico: bigint) => ceilDiv(pico, refill * 1000n);
  const free = (queued: bigint) => max(0n, full - queued) / PICO;
  if (n > capacity) return { fields: [...never(free(level), capacity, ms(level)).fields, 0n] };
  const queued = level + n * PICO;
  if (queued > full) return { fields: [...denied(free(level), capacity, ms(queued - full), ms(level)).fields, 0n] };
  const verdict = admitted(free(queued), capacity, ms(queued), n, { level: queued, last });
  return { fields: [...verdict.fields, ms(level)], store: verdict.store };
}

/** Fixed window: windows of `window` aligned to the epoch; admit when count + n <= limit. */
function fixedWindow(stored: Window | undefined, now: bigint, limit: bigint, window: bigint, n: bigint): Verdict {
  if (stored) now = max(now, stored.last);
  const start = windowStart(now, window);
  const count = stored && windowStart(stored.last, window) === start ? stored.current : 0n;
  const reset = (c: bigint) => (c === 0n ? 0n : msBetween(now, start + window));
  const remaining = max(0n, limit - count);
  if (n > limit) return never(remaining, limit, reset(count));
  if (count + n > limit) return denied(remaining, limit, reset(count), reset(count));
  return admitted(limit - count - n, limit, reset(count + n), n, { last: now, previous: 0n, current: count + n });
}

/** Sliding window: estimate = previous * (1 - elapsed / window) + current, all of it times `window`, in integers. */
function slidingWindow(stored: Window | undefined, now: bigint, limit: bigint, window: bigint, n: bigint): Verdict {
  if (stored) now = max(now, stored.last);
  const start = windowStart(now, window);
  let previous = 0n;
  let current = 0n;
  if (stored) {
    const lastStart = windowStart(stored.last, window);
    if (lastStart === start) [previous, current] = [stored.previous, stored.current];
    else if (lastStart + window === start) previous = stored.current;
  }
  const elapsed = now - start;
  const toEdge = window - elapsed;
  const estimate = (cur: bigint) => previous * toEdge + cur * window;
  const remaining = (cur: bigint) => max(0n, limit * window - estimate(cur)) / window;
  const reset = (cur: bigint) => {
    if (previous === 0n && cur === 0n) return 0n;
    return msBetween(now, cur === 0n ? start + window : start + 2n * window);
  };
  if (n > limit) return never(remaining(current), limit, reset(current));
  if (estimate(current + n) > limit * window) {
    return denied(remaining(current), limit, ceilDiv(waitFor(previous, current, toEdge, window, limit, n), 1000n), reset(current));
  }
  const after = current + n;
  return admitted(remaining(after), limit, reset(after), n, { last: now, previous, current: after });
}

/**
 * The shortest wait, in microseconds, after which `n <= limit` more units
 * fit: within this window when the previous count's weight falls enough,
 * else in the next, where `current` becomes the weighted count.
 */
function waitFor(previous: bigint, current: bigint, toEdge: bigint, window: bigint, limit: bigint, n: bigint): bigint {
  if (limit >= current + n) {
    const excess = max(0n, previous * toEdge - (limit - current - n) * window);
    const wait = ceilDiv(excess, max(previous, 1n));
    if (wait < toEdge) return wait;
  }
  const excess = max(0n, current * window - (limit - n) * window);
  return toEdge + ceilDiv(excess, max(current, 1n));
}

/** Sliding log: a unit taken at s counts while s > now - window; admit when count + n <= limit. */
function slidingLog(stored: Log | undefined, now: bigint, limit: bigint, window: bigint, n: bigint): Verdict {
  const runs = stored?.runs ?? [];
  const newest = runs.length > 0 ? runs[runs.length - 1][0] : 0n;
  now = max(now, newest);
  const cutoff = max(0n, now + 1n - window);
  const live = runs.filter(([at]) => at >= cutoff);
  const count = live.reduce((sum, [, c]) => sum + c, 0n);
  const leaves = (at: bigint) => msBetween(now, at + window);
  const reset = count === 0n ? 0n : leaves(newest);
  const remaining = max(0n, limit - count);
  if (n > limit) return never(remaining, limit, reset);
  if (count + n > limit) {
    // Wait for the oldest units to leave until n fit.
    let seen = 0n;
    const run = live.find(([, c]) => (seen += c) >= count + n - limit);
    return denied(remaining, limit, run ? leaves(run[0]) : reset, reset);
  }
  return admitted(remaining - n, limit, n > 0n ? leaves(now) : reset, n, { runs: [...live, [now, n]] });
}

/** A missing concurrency key: no lease, ids from 1. */
const FRESH: Leases = { last: 0n, nextId: 1n, held: [] };

const liveAt = (leases: Leases, now: bigint) => leases.held.filter((lease) => lease.expires > now);
const heldAt = (leases: Leases, now: bigint) => liveAt(leases, now).reduce((sum, lease) => sum + lease.n, 0n);

/** Milliseconds from `now` until every live lease but `except` has run out. */
function leasesReset(leases: Leases, now: bigint, except?: bigint): bigint {
  return liveAt(leases, now)
    .filter((lease) => lease.id !== except)
    .reduce((longest, lease) => max(longest, msBetween(now, lease.expires)), 0n);
}

/** The leases after a change at `at`: those run out by then go; with none left, ids start again at 1. */
function after(leases: Leases, at: bigint): Leases {
  const last = max(at, leases.last);
  const held = liveAt(leases, last);
  return { last, nextId: held.length === 0 ? 1n : leases.nextId, held };
}

/** Concurrency: take `n` slots under a new lease when at most `limit` are then held. A sixth field, lease_id. */
function concurrency(stored: Leases | undefined, now: bigint, limit: bigint, leaseUs: bigint, n: bigint): Verdict {
  const leases = stored ?? FRESH;
  now = max(now, leases.last);
  const held = heldAt(leases, now);
  const reset = leasesReset(leases, now);
  const remaining = max(0n, limit - held);
  if (n > limit) return { fields: [...never(remaining, limit, reset).fields, 0n] };
  if (held + n > limit) {
    // Wait for the leases that run out first until n fit.
    const ends = liveAt(leases, now).sort((a, b) => (a.expires < b.expires ? -1 : a.expires > b.expires ? 1 : 0));
    let freed = 0n;
    const end = ends.find((lease) => (freed += lease.n) >= held + n - limit);
    return { fields: [...denied(remaining, limit, end ? msBetween(now, end.expires) : reset, reset).fields, 0n] };
  }
  const nextId = held === 0n ? 1n : leases.nextId;
  // Every id was given out: they start again once no lease is left.
  if (n > 0n && nextId > MAX_ID) return { fields: [...denied(remaining, limit, reset, reset).fields, 0n] };
  if (n === 0n) return { fields: [1n, remaining, limit, 0n, reset, 0n] };
  const lease = { id: nextId, expires: now + leaseUs, n };
  const kept = after(leases, now);
  const store: Leases = { last: kept.last, nextId: max(kept.nextId, nextId + 1n), held: [...kept.held, lease] };
  return { fields: [1n, remaining - n, limit, 0n, max(reset, msBetween(now, lease.expires)), nextId], store };
}

type Decide = (stored: any, now: bigint, size: bigint, per: bigint, n: bigint) => Verdict;

const ALGORITHMS: Record<LocalAlgorithm, Decide> = {
  tokenbucket: tokenBucket,
  leakybucket: leakyBucket,
  fixedwindow: fixedWindow,
  slidingwindow: slidingWindow,
  slidinglog: slidingLog,
  concurrency,
};

interface Entry {
  algorithm: LocalAlgorithm;
  state: State;
}

export class LocalLimiter {
  // A Map keeps insertion order: the first entry is the least recently used.
  private readonly states = new Map<string, Entry>();

  /** `size`: the most keys kept; the least recently used go first. */
  constructor(readonly size = 100_000) {}

  /** RL.MULTI: every limit admits its `n` and takes it, or nothing changes. Throws WRONGTYPE as the module does. */
  multi(keys: string[], nowUs: bigint, specs: LocalSpec[]): MultiReply {
    const run = (key: string, spec: LocalSpec, n: bigint) =>
      ALGORITHMS[spec.algorithm](this.state(key, spec.algorithm), nowUs, BigInt(spec.size), micros(spec.param), n);
    const verdicts = keys.map((key, i) => run(key, specs[i], BigInt(specs[i].n)));
    const allowed = verdicts.every((v) => v.fields[0] === 1n);
    if (allowed) {
      keys.forEach((key, i) => this.store(key, specs[i].algorithm, verdicts[i]));
      return [1, 0, ...verdicts.map((v) => v.fields.map(Number))];
    }
    // Nothing is taken: a limit that would admit reports the state it keeps, as a look (n = 0) does.
    const fields = verdicts.map((v, i) => (v.fields[0] === 1n ? run(keys[i], specs[i], 0n) : v).fields.map(Number));
    const waits = fields.map((f) => f[3]);
    return [0, waits.includes(-1) ? -1 : Math.max(...waits), ...fields];
  }

  /** RL.RELEASE: `[released, held, reset_after_ms]`; releasing the last lease forgets the key. */
  release(key: string, leaseId: number, nowUs: bigint): [number, number, number] {
    return this.changeLease(key, leaseId, nowUs, (held, lease) => held.filter((l) => l.id !== lease.id));
  }

  /** RL.RENEW: `[renewed, held, reset_after_ms]`; a held lease runs out `leaseUs` from now instead. */
  renew(key: string, leaseId: number, leaseUs: bigint, nowUs: bigint): [number, number, number] {
    return this.changeLease(key, leaseId, nowUs, (held, lease, now) => held.map((l) => (l.id === lease.id ? { ...l, expires: now + leaseUs } : l)));
  }

  /**
   * A change to lease `leaseId` while it is held (`change` gives the leases
   * after it); nothing changes when it is not. `[1 or 0, held, reset_after_ms]`
   * after the call, as RL.RELEASE and RL.RENEW reply.
   */
  private changeLease(key: string, leaseId: number, nowUs: bigint, change: (held: Lease[], lease: Lease, now: bigint) => Lease[]): [number, number, number] {
    const leases = (this.state(key, 'concurrency') as Leases | undefined) ?? FRESH;
    const now = max(nowUs, leases.last);
    const id = BigInt(leaseId);
    const lease = liveAt(leases, now).find((l) => l.id === id);
    if (!lease) return [0, Number(heldAt(leases, now)), Number(leasesReset(leases, now))];
    const kept = after(leases, now);
    const changed = { ...kept, held: change(kept.held, lease, now) };
    const held = heldAt(changed, now);
    const reset = leasesReset(changed, now);
    this.store(key, 'concurrency', { fields: [1n, held, 0n, 0n, reset], store: changed });
    return [1, Number(held), Number(reset)];
  }

  /** The key's state, used now; WRONGTYPE when it holds another algorithm's. */
  private state(key: string, algorithm: LocalAlgorithm): State | undefined {
    const entry = this.states.get(key);
    if (!entry) return undefined;
    if (entry.algorithm !== algorithm) throw new Error(WRONGTYPE);
    this.states.delete(key);
    this.states.set(key, entry);
    return entry.state;
  }

  /** Stores a verdict's state; one that leaves the limiter fresh (reset_after_ms 0) forgets the key, as Redis deletes it. */
  private store(key: string, algorithm: LocalAlgorithm, verdict: Verdict) {
    if (verdict.store === undefined) return;
    this.states.delete(key);
    if (verdict.fields[4] === 0n) return;
    this.states.set(key, { algorithm, state: verdict.store });
    for (const oldest of this.states.keys()) {
      if (this.states.size <= this.size) break;
      this.states.delete(oldest);
    }
  }
}
