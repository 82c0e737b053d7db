// A decision as HTTP: the IETF RateLimit fields, the older trio, and the
// 429 body the seed guide shows.

import type { Decision } from './limiter.js';

/** Whole seconds, rounded up. */
export function seconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

/** Quoted as a Structured Field String. */
function sfString(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/**
 * The fields of draft-ietf-httpapi-ratelimit-headers:
 * `RateLimit-Policy: "default";q=100;w=60` and `RateLimit: "default";r=42;t=30`,
 * and, with `legacy`, `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`.
 * A denied decision adds `Retry-After`, unless it can never pass.
 */
export function rateLimitHeaders(decision: Decision, legacy = false): Record<string, string> {
  const { name, quota, windowSeconds } = decision.policy;
  const reset = seconds(decision.resetAfterMs);
  const headers: Record<string, string> = {
    'RateLimit-Policy': `${sfString(name)};q=${quota};w=${windowSeconds}`,
    RateLimit: `${sfString(name)};r=${decision.remaining};t=${reset}`,
  };
  if (legacy) {
    headers['RateLimit-Limit'] = String(decision.limit);
    headers['RateLimit-Remaining'] = String(decision.remaining);
    headers['RateLimit-Reset'] = String(reset);
  }
  if (!decision.allowed && decision.retryAfterMs >= 0) {
    headers['Retry-After'] = String(seconds(decision.retryAfterMs));
  }
  return headers;
}

/** The JSON body of a 429. `retry_after_seconds` is null when the request can never pass. */
export function deniedBody(decision: Decision, message = 'Rate limit exceeded. Please try again later.') {
  return {
    error: 'rate_limit_exceeded',
    message,
    retry_after_seconds: decision.retryAfterMs >= 0 ? seconds(decision.retryAfterMs) : null,
  };
}
