// A decision as HTTP: the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers, Retry-After, and the 429 bodies.
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
 * The two IETF fields, and Retry-After on a denial that can pass later.
 * Each is a List (RFC 8941 section 4.1.1): members joined by ", ", each a
 * String with `;key=value` parameters.
 */
export function rateLimitHeaders(decision: Decision): Record<string, string> {
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
  return withRetryAfter({ 'RateLimit-Policy': policy, RateLimit: state }, decision);
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
