// What a limiter decides for one request: the decision and each limit's part
// of it, what a request takes of each limit (a charge), and the giving back
// (refund, release, renew) that a decision carries.

import { checkInteger, type Algorithm, type CheckedLimit, type QuotaUnit } from './options.js';

/** What one request takes of one limit. */
export interface Charge {
  limit: CheckedLimit;
  /** The limit's Redis key for this request. */
  key: string;
  /** The limit's size for this request. */
  size: number;
  cost: number;
}

/** One limit's part of a decision. */
export interface LimitDecision {
  name: string;
  algorithm: Algorithm;
  /** The Redis key. */
  key: string;
  /** Whether this limit alone admits the request. */
  allowed: boolean;
  remaining: number;
  limit: number;
  /** 0 when allowed, -1 when it never can. */
  retryAfterMs: number;
  resetAfterMs: number;
  /** Leaky bucket: how long the request should wait before running. */
  delayMs?: number;
  /** Concurrency: the lease holding this request's slots, for release(); 0 when none was taken. */
  leaseId?: number;
  cost: number;
  /** rate, window or lease, as configured. */
  param: number;
  quotaUnit: QuotaUnit | undefined;
}

/** What the limiter decided for one request. */
export interface Decision {
  allowed: boolean;
  /** 0 when allowed, -1 when the request can never be admitted, else the wait. */
  retryAfterMs: number;
  neverAllowed: boolean;
  /** The longest leaky-bucket delay among the limits (0 without one). */
  delayMs: number;
  limits: LimitDecision[];
  /**
   * Gives back units this request took: every limit's whole cost with no
   * argument, or `{ name: units }` to the limits named only (at most the
   * cost each took). Concurrency limits are not refunded: release() frees them.
   */
  refund(units?: Record<string, number>): Promise<void>;
  /**
   * Frees the slots of every lease this decision took (RL.RELEASE), once:
   * later calls do nothing. Never rejects: a failure is logged, and the
   * lease runs out by itself.
   */
  release(): Promise<void>;
  /**
   * Makes every lease this decision holds run `lease` seconds from now
   * (RL.RENEW), for work that outlasts it. True when each was still held;
   * false when one had run out or been released, or the decision holds
   * none. Rejects when Redis cannot answer, so the work can stop.
   */
  renew(): Promise<boolean>;
}

/** Redis did not answer in time, or is down. */
export class RateLimiterUnavailable extends Error {
  constructor(readonly cause: unknown) {
    super(`rate limiter unavailable: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'RateLimiterUnavailable';
  }
}

function longestDelay(limits: LimitDecision[]): number {
  let longest = 0;
  for (const l of limits) if (l.delayMs !== undefined && l.delayMs > longest) longest = l.delayMs;
  return longest;
}

/**
 * A decision of these limits; `refund` and `release` give units and leases
 * back where they were taken (Redis, or in process). Release runs once.
 */
export function decisionOf(
  allowed: boolean,
  retryAfterMs: number,
  limits: LimitDecision[],
  refund: Decision['refund'],
  release: () => Promise<void>,
  renew: () => Promise<boolean>,
): Decision {
  let released: Promise<void> | undefined;
  return {
    allowed,
    retryAfterMs,
    neverAllowed: retryAfterMs === -1,
    delayMs: allowed ? longestDelay(limits) : 0,
    limits,
    refund,
    release: () => (released ??= release()),
    renew,
  };
}

/**
 * What refund(units) gives back, per charge: every cost without `units`,
 * else the named limits' units (at most their cost). A bare number was the
 * old form, which gave it to every limit: refused, as is an unknown name.
 */
export function unitsBack(charges: Charge[], units: Record<string, number> | undefined): [Charge, number][] {
  if (units === undefined) return charges.filter((c) => c.limit.algorithm !== 'concurrency').map((c) => [c, c.cost]);
  if (typeof units !== 'object' || units === null || Array.isArray(units)) {
    throw new TypeError(`refund() takes units per limit name, e.g. refund({ ${JSON.stringify(charges[0]?.limit.name ?? 'tokens')}: 3 }), or nothing for every limit's cost (got ${String(units)})`);
  }
  return Object.entries(units).map(([name, n]) => {
    const charge = charges.find((c) => c.limit.name === name);
    if (!charge) throw new TypeError(`refund(): no limit named ${JSON.stringify(name)} in this decision (it has ${charges.map((c) => JSON.stringify(c.limit.name)).join(', ')})`);
    if (charge.limit.algorithm === 'concurrency') throw new TypeError(`refund(): ${JSON.stringify(name)} is a concurrency limit: its slots come back with release(), not a refund`);
    checkInteger(`refund(): ${name}`, n, 0);
    return [charge, Math.min(n, charge.cost)];
  });
}

/** Renews each lease of `limits` (in `charges`' order) by `renewOne`: whether every one was held, false with none. */
export async function allRenewed(
  charges: Charge[],
  limits: LimitDecision[],
  renewOne: (charge: Charge, leaseId: number) => number[] | Promise<number[]>,
): Promise<boolean> {
  const leased = limits.flatMap((l, i) => (l.leaseId ? [[charges[i], l.leaseId] as const] : []));
  if (leased.length === 0) return false;
  const replies = await Promise.all(leased.map(([charge, leaseId]) => renewOne(charge, leaseId)));
  return replies.every(([renewed]) => renewed === 1);
}
