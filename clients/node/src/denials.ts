// Denials answered in process: after Redis denies a request, the same
// partition keys and limits, at the same or a larger cost, are denied here
// until the denial's retry_after_ms has passed, without a Redis call. A flood
// from one client then costs Redis one call per Retry-After, not one per
// request. It can only be stricter than Redis: a refund made elsewhere in
// the meantime is not seen.

import type { Charge, Decision } from './decision.js';

/**
 * What a denial is remembered by: the Redis keys and the limits' sizes for
 * the request (each cache belongs to one limiter, whose limits are fixed).
 */
export function keyOf(charges: Charge[]): string {
  let key = '';
  for (const c of charges) key += `${c.key}\n${c.size}\n`;
  return key;
}

/** How long a "never admissible" denial (retry_after_ms -1) is kept. */
const NEVER_MS = 1000;

interface Entry {
  decision: Decision;
  /** Each limit's cost in the denied request, in the limiter's order. */
  costs: number[];
  /** performance.now() when Redis answered. */
  at: number;
  until: number;
}

export class DenialCache {
  // A Map keeps insertion order: the first entry is the least recently used.
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly size: number) {}

  get enabled(): boolean {
    return this.size > 0;
  }

  /** Whether any denial is kept (an admitted request then skips the lookup). */
  get holdsAny(): boolean {
    return this.entries.size > 0;
  }

  /** The cached denial for `key` at these costs (each limit's, in order), counted down to now; undefined when there is none. */
  answer(key: string, charges: readonly { cost: number }[]): Decision | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    const now = performance.now();
    if (now >= entry.until) {
      this.entries.delete(key);
      return undefined;
    }
    if (charges.some((charge, i) => charge.cost < entry.costs[i])) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return countedDown(entry.decision, Math.floor(now - entry.at));
  }

  /** Keeps a denial Redis gave (the limiter calls it for denials only, with the cache on). */
  remember(key: string, charges: readonly { cost: number }[], decision: Decision) {
    const costs = charges.map((c) => c.cost);
    const at = performance.now();
    const until = at + (decision.retryAfterMs === -1 ? NEVER_MS : decision.retryAfterMs);
    this.entries.delete(key);
    this.entries.set(key, { decision, costs, at, until });
    if (this.entries.size > this.size) this.entries.delete(this.entries.keys().next().value as string);
  }
}

const less = (ms: number, elapsed: number) => (ms > 0 ? Math.max(0, ms - elapsed) : ms);

/** The decision `elapsed` ms later: its waits and resets shorter by that, so Retry-After counts down. */
function countedDown(decision: Decision, elapsed: number): Decision {
  return {
    ...decision,
    retryAfterMs: less(decision.retryAfterMs, elapsed),
    limits: decision.limits.map((limit) => ({
      ...limit,
      retryAfterMs: less(limit.retryAfterMs, elapsed),
      resetAfterMs: less(limit.resetAfterMs, elapsed),
    })),
  };
}
