// A decision as HTTP: the rate limit fields in the style the `headers`
// option picks (the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers, the draft's earlier three fields,
// or GitHub's X-RateLimit-*), Retry-After, and the 429 bodies.
// docs/clients.md says what each value is and why.

import { serializeInteger, serializeString } from 'structured-headers';

import type { Decision, LimitDecision } from './decision.js';
import { isBucket, type Algorithm } from './options.js';

/** Structured Fields Integers stop at 15 digits. */
const SF_MAX = 999_999_999_999_999;

/** Whole seconds, rounded up. */
export function seconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

/** The time the whole quota takes to come back, in whole seconds: the window, or limit / rate. */
export function windowSeconds(limit: { algorithm: Algorithm; limit: number; param: number }): number {
  return Math.max(1, Math.ceil(isBucket(limit.algorithm) ? limit.limit / limit.param : limit.param));
}

/**
 * Seconds until more quota is available (the draft's `t`), or undefined
 * when none will come: the limiter is fresh, or it can never admit.
 */
function resetSeconds(limit: LimitDecision, decision: Decision): number | undefined {
  if (!decision.allowed && !limit.allowed) {
    return limit.retryAfterMs === -1 ? undefined : seconds(decision.retryAfterMs);
  }
  if (limit.resetAfterMs <= 0) return undefined;
  if (isBucket(limit.algorithm)) {
    // Units come back continuously: the next whole one is (limit - remaining - 1) / rate
    // before full. The reply's reset is rounded up to a millisecond: take that back.
    const nextUnit = (limit.resetAfterMs - 1) / 1000 - (limit.limit - limit.remaining - 1) / limit.param;
    return Math.max(0, Math.ceil(nextUnit));
  }
  // Fixed window: its end. Sliding window and log: when fresh, an upper bound.
  // Concurrency: when the last lease runs out, an upper bound (a release may come sooner).
  return seconds(limit.resetAfterMs);
}

/**
 * A Structured Field String (a policy name, a quota unit), made once per
 * string: the serializer's checks and escapes ran for every member of both
 * fields on every request, a tenth of the middleware's CPU.
 */
const strings = new Map<string, string>();

function sfString(text: string): string {
  let item = strings.get(text);
  if (item === undefined) {
    if (strings.size >= 1000) strings.clear(); // names and units come from the limits' options: few
    strings.set(text, (item = serializeString(text)));
  }
  return item;
}

const sfInteger = (n: number) => serializeInteger(Math.min(n, SF_MAX));

/**
 * The fields a response carries (option `headers`): `draft-10` the
 * draft's RateLimit-Policy and RateLimit over every limit; `draft-6`
 * RateLimit-Limit, -Remaining and -Reset and `legacy` X-RateLimit-Limit,
 * -Remaining and -Reset (Unix seconds) for the limit closest to denial;
 * `false` none. `true` is `draft-10`.
 */
export type HeaderStyle = 'draft-10' | 'draft-6' | 'legacy' | false;

export const HEADER_STYLES: readonly (HeaderStyle | true)[] = [true, 'draft-10', 'draft-6', 'legacy', false];

/**
 * A decision's rate limit fields in `style`, and Retry-After on a denial
 * that can pass later whatever the style. `nowMs`: the clock X-RateLimit-Reset
 * counts from.
 */
export function rateLimitHeaders(decision: Decision, style: HeaderStyle | true = 'draft-10', nowMs = Date.now()): Record<string, string> {
  if (style === true || style === 'draft-10') return withRetryAfter(draft10(decision), decision);
  if (style === false || decision.limits.length === 0) return withRetryAfter({}, decision);
  const limit = closestToDenial(decision);
  const t = resetSeconds(limit, decision) ?? 0;
  const fields: Record<string, string> =
    style === 'draft-6'
      ? { 'RateLimit-Limit': String(limit.limit), 'RateLimit-Remaining': String(limit.remaining), 'RateLimit-Reset': String(t) }
      : { 'X-RateLimit-Limit': String(limit.limit), 'X-RateLimit-Remaining': String(limit.remaining), 'X-RateLimit-Reset': String(Math.ceil(nowMs / 1000) + t) };
  return withRetryAfter(fields, decision);
}

/** The one limit the single-limit styles show: on a denial the denying limit with the longest wait, else the fewest remaining (the first on a tie). */
function closestToDenial(decision: Decision): LimitDecision {
  let closest: LimitDecision | undefined;
  for (const limit of decision.limits) {
    if (decision.allowed ? closest === undefined || limit.remaining < closest.remaining : !limit.allowed && (closest === undefined || limit.retryAfterMs > closest.retryAfterMs)) closest = limit;
  }
  return closest ?? decision.limits[0];
}

/**
 * The two IETF fields. Each is a List (RFC 8941 section 4.1.1): members
 * joined by ", ", each a String with `;key=value` parameters.
 */
function draft10(decision: Decision): Record<string, string> {
  let policy = '';
  let state = '';
  for (const limit of decision.limits) {
    const comma = policy === '' ? '' : ', ';
    const name = sfString(limit.name);
    policy += `${comma}${name};q=${sfInteger(limit.limit)}`;
    if (limit.quotaUnit !== undefined && limit.quotaUnit !== 'requests') policy += `;qu=${sfString(limit.quotaUnit)}`;
    // Slots held at once have no window: a lease is not one.
    if (limit.algorithm !== 'concurrency') policy += `;w=${sfInteger(windowSeconds(limit))}`;
    state += `${comma}${name};r=${sfInteger(limit.remaining)}`;
    const t = resetSeconds(limit, decision);
    if (t !== undefined) state += `;t=${sfInteger(t)}`;
  }
  return { 'RateLimit-Policy': policy, RateLimit: state };
}

/** The single-limit fields of each style, by their Remaining field: one limit's three, kept together. */
const TRIOS: Record<string, readonly string[]> = {
  'RateLimit-Remaining': ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'],
  'X-RateLimit-Remaining': ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'],
};
const SINGLE = new Set(Object.values(TRIOS).flat());

/**
 * The fields to set on a response that an earlier limiter (one made
 * separately, stacked on the request) may have set already (`earlier`
 * reads them): the draft's lists joined, the longer Retry-After, and of
 * the single-limit styles the earlier limit's three fields kept when it is
 * closer to denial (fewer remaining) and this one admits. `fields` itself
 * when there is nothing earlier.
 */
export function mergedHeaders(fields: Record<string, string>, earlier: (name: string) => unknown): Record<string, string> {
  let merged: Record<string, string> | undefined;
  for (const name in fields) {
    const before = earlier(name);
    if (before === undefined || before === null || before === '') continue;
    merged ??= { ...fields };
    const trio = TRIOS[name];
    if (name === 'Retry-After') merged[name] = String(Math.max(Number(before), Number(fields[name])));
    else if (!SINGLE.has(name)) merged[name] = `${Array.isArray(before) ? before.join(', ') : String(before)}, ${fields[name]}`;
    else if (trio !== undefined && !('Retry-After' in fields) && Number(before) <= Number(fields[name])) {
      for (const kept of trio) merged[kept] = String(earlier(kept));
    }
  }
  return merged ?? fields;
}

/** `headers` with Retry-After added on a denial that can pass later (with or without the RateLimit fields). */
export function withRetryAfter(headers: Record<string, string>, decision: Decision): Record<string, string> {
  if (!decision.allowed && decision.retryAfterMs >= 0) headers['Retry-After'] = String(seconds(decision.retryAfterMs));
  return headers;
}

export const DEFAULT_MESSAGE = 'Rate limit exceeded. Please try again later.';
export const NEVER_MESSAGE = 'This request costs more than the rate limit allows in total; it can never be admitted.';

/** The JSON body of a 429; `message` replaces the default one of a denial that can pass later. */
export function deniedBody(decision: Decision, message: string = DEFAULT_MESSAGE) {
  return decision.neverAllowed
    ? { error: 'rate_limit_exceeded', message: NEVER_MESSAGE, retry_after_seconds: null }
    : { error: 'rate_limit_exceeded', message, retry_after_seconds: seconds(decision.retryAfterMs) };
}

/** The body of a 503 when Redis is unavailable and the limiter fails closed. */
export const UNAVAILABLE_BODY = { error: 'rate_limiter_unavailable' };
