// The module's commands as the limiter sends them, and their replies read
// back: a limit's Redis key, the call that takes a request's charges (one
// limit's own command, or RL.MULTI of several; grouped by hash tag on a
// cluster), RL.REFUND, RL.RELEASE and RL.RENEW.

import type { Charge, LimitDecision } from './decision.js';
import type { MultiReply } from './local.js';
import type { Algorithm, CheckedLimit } from './options.js';

/** A number as the module takes it: at most six decimals. */
export function decimal(value: number): string {
  return String(Number(value.toFixed(6)));
}

const specWords = new WeakMap<CheckedLimit, { command: string; param: string }>();

/** A limit's algorithm and parameter as the module takes them, worked out once per limit. */
export function wordsOf(limit: CheckedLimit): { command: string; param: string } {
  let words = specWords.get(limit);
  if (words === undefined) specWords.set(limit, (words = { command: limit.algorithm.toUpperCase(), param: decimal(limit.param) }));
  return words;
}

/** An unnamed limit's key name at the size it was last used at (a size may be a function of the request). */
const unnamedKeys = new WeakMap<CheckedLimit, { size: number; name: string }>();

/**
 * The last part of a limit's Redis key, for a request whose quota is
 * `size`: its name; for an unnamed limit, what it is (algorithm, limit,
 * rate or window, and a quota unit other than requests), so that different
 * unnamed limiters never share state and identical ones do.
 */
export function keyName(limit: CheckedLimit, size: number): string {
  if (limit.named) return limit.name;
  const known = unnamedKeys.get(limit);
  if (known !== undefined && known.size === size) return known.name;
  const spec = `${limit.algorithm}:${size}:${wordsOf(limit).param}`;
  // A concurrency limit's unit (concurrent-requests) is the only one it has: not repeated.
  const ownUnit = limit.quotaUnit === undefined || limit.quotaUnit === 'requests' || limit.algorithm === 'concurrency';
  const name = ownUnit ? spec : `${spec}:${limit.quotaUnit}`;
  unnamedKeys.set(limit, { size, name });
  return name;
}

/**
 * The call that takes `charges`: one limit's own command (cheaper for Redis
 * than an RL.MULTI of one, with the same fields), RL.MULTI for several.
 */
export function checkArgs(charges: Charge[]): string[] {
  if (charges.length === 1) {
    const [{ limit, key, size, cost }] = charges;
    const { command, param } = wordsOf(limit);
    return [command === 'CONCURRENCY' ? 'RL.ACQUIRE' : `RL.${command}`, key, String(size), param, '*', String(cost)];
  }
  const args = ['RL.MULTI', String(charges.length)];
  for (const c of charges) args.push(c.key);
  args.push('*');
  for (const { limit, size, cost } of charges) {
    const { command, param } = wordsOf(limit);
    args.push(command, String(size), param, String(cost));
  }
  return args;
}

/** An RL.MULTI reply read back: the whole call's answer, and each limit's part. */
export interface MultiResult {
  charges: Charge[];
  allowed: boolean;
  retryAfterMs: number;
  limits: LimitDecision[];
}

/** checkArgs' reply as RL.MULTI's: one limit's own fields `f` are `[f[0], f[0] == 1 ? 0 : f[3], f]` in RL.MULTI. */
export function checkReply(charges: Charge[], reply: unknown): MultiReply {
  if (charges.length > 1) return reply as MultiReply;
  const f = reply as number[];
  return [f[0], Number(f[0]) === 1 ? 0 : f[3], f];
}

/** An RL.MULTI reply (from Redis or the local limiter) for `charges`, as the decision's parts. */
export function multiResult(charges: Charge[], reply: MultiReply): MultiResult {
  const limits: LimitDecision[] = [];
  for (let i = 0; i < charges.length; i++) {
    const f = reply[i + 2] as number[];
    const { limit: checked, key, cost } = charges[i];
    const limit: LimitDecision = {
      name: checked.name,
      algorithm: checked.algorithm,
      key,
      allowed: Number(f[0]) === 1,
      remaining: Number(f[1]),
      limit: Number(f[2]),
      retryAfterMs: Number(f[3]),
      resetAfterMs: Number(f[4]),
      cost,
      param: checked.param,
      quotaUnit: checked.quotaUnit,
    };
    if (f.length > 5) Object.assign(limit, sixthField(checked.algorithm, Number(f[5])));
    // Slots free as requests end, not as leases run out: a denial suggests the limit's hint, never the lease.
    if (checked.retryAfterMs !== undefined && limit.retryAfterMs > checked.retryAfterMs) limit.retryAfterMs = checked.retryAfterMs;
    limits.push(limit);
  }
  const allowed = Number(reply[0]) === 1;
  return { charges, allowed, retryAfterMs: allowed ? 0 : longestWait(limits), limits };
}

/** A denial's retry time: -1 when a limit can never admit, else the longest of the limits' (as the module's reply). */
export function longestWait(limits: readonly { retryAfterMs: number }[]): number {
  let longest = 0;
  for (const { retryAfterMs } of limits) {
    if (retryAfterMs === -1) return -1;
    if (retryAfterMs > longest) longest = retryAfterMs;
  }
  return longest;
}

/** RL.REFUND of `units` to a charge's limit: replies with the limit's fields after it. */
export function refundArgs({ limit, key, size }: Charge, units: number): string[] {
  const { command, param } = wordsOf(limit);
  return ['RL.REFUND', key, command, String(size), param, '*', String(units)];
}

/** RL.RELEASE of a lease: replies [released, held, reset_after_ms]. */
export function releaseArgs(key: string, leaseId: number): string[] {
  return ['RL.RELEASE', key, String(leaseId), '*'];
}

/** RL.RENEW of a lease for the limit's own lease time: replies [renewed, held, reset_after_ms]. */
export function renewArgs({ limit, key }: Charge, leaseId: number): string[] {
  return ['RL.RENEW', key, String(leaseId), wordsOf(limit).param, '*'];
}

/** A reply's sixth field, by algorithm: the leaky bucket's delay, a concurrency limit's lease id. */
function sixthField(algorithm: Algorithm, sixth: number | undefined): Pick<LimitDecision, 'delayMs' | 'leaseId'> {
  if (sixth === undefined) return {};
  return algorithm === 'concurrency' ? { leaseId: sixth } : { delayMs: sixth };
}

/** A limit's state from the fields of a reply (remaining, reset, delay). */
export function stateOf(algorithm: Algorithm, fields: number[]): Partial<LimitDecision> {
  const [, remaining, , , reset, sixth] = fields.map(Number);
  return { remaining, resetAfterMs: reset, ...sixthField(algorithm, sixth) };
}

/** Charges grouped by their key's hash tag, so each group shares a cluster slot. */
export function groupByTag(charges: Charge[]): Charge[][] {
  const groups = new Map<string, Charge[]>();
  for (const charge of charges) {
    const start = charge.key.indexOf('{');
    const tag = charge.key.slice(start + 1, charge.key.indexOf('}', start + 1));
    groups.set(tag, [...(groups.get(tag) ?? []), charge]);
  }
  return [...groups.values()];
}
