// The RateLimit fields of a decision, exactly, per algorithm (what
// docs/clients.md specifies), from decisions as the module replies them.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseList } from 'structured-headers';

import { mergedHeaders } from '../src/headers.js';
import { deniedBody, rateLimitHeaders, type Decision, type LimitDecision } from '../src/index.js';

function limit(fields: Partial<LimitDecision> & Pick<LimitDecision, 'name' | 'algorithm' | 'limit' | 'param'>): LimitDecision {
  return { key: `k:${fields.name}`, allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, cost: 1, quotaUnit: undefined, ...fields };
}

function decision(limits: LimitDecision[], retryAfterMs = 0): Decision {
  const allowed = retryAfterMs === 0;
  return { allowed, retryAfterMs, neverAllowed: retryAfterMs === -1, delayMs: 0, limits, refund: async () => {}, release: async () => {}, renew: async () => false };
}

test('token bucket: t is when the next whole token is back; w is limit/rate', () => {
  // 10 tokens at 0.5/s, 7.5 left: full in 5 s, the 8th token in 1 s.
  const tb = limit({ name: 'burst', algorithm: 'tokenbucket', limit: 10, param: 0.5, remaining: 7, resetAfterMs: 5000 });
  assert.deepEqual(rateLimitHeaders(decision([tb])), { 'RateLimit-Policy': '"burst";q=10;w=20', RateLimit: '"burst";r=7;t=1' });
  // 3 at 0.001/s after one request: the next token in 1000 s.
  const slow = limit({ name: 'default', algorithm: 'tokenbucket', limit: 3, param: 0.001, remaining: 2, resetAfterMs: 1_000_000 });
  assert.equal(rateLimitHeaders(decision([slow])).RateLimit, '"default";r=2;t=1000');
});

test('a fresh limiter has no t: no more quota will come', () => {
  const fresh = limit({ name: 'default', algorithm: 'tokenbucket', limit: 3, param: 1, remaining: 3, resetAfterMs: 0, cost: 0 });
  assert.equal(rateLimitHeaders(decision([fresh])).RateLimit, '"default";r=3');
});

test('windows: t is the end of the fixed window, the fresh time of the sliding ones; quota units', () => {
  const fixed = limit({ name: 'minute', algorithm: 'fixedwindow', limit: 60, param: 60, remaining: 59, resetAfterMs: 12_345 });
  const sliding = limit({ name: 'hour', algorithm: 'slidingwindow', limit: 1000, param: 3600, remaining: 990, resetAfterMs: 4_000_001, quotaUnit: 'content-bytes' });
  const log = limit({ name: 'log', algorithm: 'slidinglog', limit: 5, param: 0.5, remaining: 4, resetAfterMs: 500 });
  assert.deepEqual(rateLimitHeaders(decision([fixed, sliding, log])), {
    'RateLimit-Policy': '"minute";q=60;w=60, "hour";q=1000;qu="content-bytes";w=3600, "log";q=5;w=1',
    RateLimit: '"minute";r=59;t=13, "hour";r=990;t=4001, "log";r=4;t=1',
  });
});

test('denied: the denying limits have t = Retry-After; the others their own t', () => {
  const burst = limit({ name: 'burst', algorithm: 'tokenbucket', limit: 10, param: 1, remaining: 0, allowed: false, retryAfterMs: 800, resetAfterMs: 9800 });
  const daily = limit({ name: 'daily', algorithm: 'fixedwindow', limit: 1000, param: 86400, remaining: 0, allowed: false, retryAfterMs: 5_400_000, resetAfterMs: 5_400_000 });
  const ip = limit({ name: 'ip', algorithm: 'slidingwindow', limit: 100, param: 60, remaining: 50, allowed: true, resetAfterMs: 90_000 });
  assert.deepEqual(rateLimitHeaders(decision([burst, daily, ip], 5_400_000)), {
    'RateLimit-Policy': '"burst";q=10;w=10, "daily";q=1000;w=86400, "ip";q=100;w=60',
    RateLimit: '"burst";r=0;t=5400, "daily";r=0;t=5400, "ip";r=50;t=90',
    'Retry-After': '5400',
  });
  assert.deepEqual(deniedBody(decision([burst], 1)), {
    error: 'rate_limit_exceeded',
    message: 'Rate limit exceeded. Please try again later.',
    retry_after_seconds: 1,
  });
});

test('concurrency: qu="concurrent-requests", no w; r the free slots, t when the last lease runs out, Retry-After on a denial', () => {
  const slots = limit({ name: 'slots', algorithm: 'concurrency', limit: 3, param: 30, remaining: 1, resetAfterMs: 29_500, quotaUnit: 'concurrent-requests', leaseId: 7 });
  assert.deepEqual(rateLimitHeaders(decision([slots])), {
    'RateLimit-Policy': '"slots";q=3;qu="concurrent-requests"',
    RateLimit: '"slots";r=1;t=30',
  });
  const full = limit({ name: 'slots', algorithm: 'concurrency', limit: 3, param: 30, remaining: 0, allowed: false, retryAfterMs: 12_001, resetAfterMs: 29_000, quotaUnit: 'concurrent-requests', leaseId: 0 });
  assert.deepEqual(rateLimitHeaders(decision([full], 12_001)), {
    'RateLimit-Policy': '"slots";q=3;qu="concurrent-requests"',
    RateLimit: '"slots";r=0;t=13',
    'Retry-After': '13',
  });
});

test('a request that can never pass: no Retry-After, no t, its own body', () => {
  const tokens = limit({ name: 'tokens', algorithm: 'tokenbucket', limit: 1000, param: 10, remaining: 1000, allowed: false, retryAfterMs: -1, cost: 5000 });
  const d = decision([tokens], -1);
  assert.deepEqual(rateLimitHeaders(d), { 'RateLimit-Policy': '"tokens";q=1000;w=100', RateLimit: '"tokens";r=1000' });
  assert.deepEqual(deniedBody(d, 'custom text'), {
    error: 'rate_limit_exceeded',
    message: 'This request costs more than the rate limit allows in total; it can never be admitted.',
    retry_after_seconds: null,
  });
});

test('quotas beyond a Structured Fields Integer are capped at its largest', () => {
  const huge = limit({ name: 'bytes', algorithm: 'tokenbucket', limit: 2 ** 53 - 1, param: 1e12, remaining: 2 ** 53 - 2, resetAfterMs: 1 });
  assert.deepEqual(rateLimitHeaders(decision([huge])), {
    'RateLimit-Policy': '"bytes";q=999999999999999;w=9008',
    RateLimit: '"bytes";r=999999999999999;t=0',
  });
});

test('names with quotes and backslashes are escaped; both fields parse back as Structured Fields lists', () => {
  const quoted = limit({ name: 'say "hi"\\now', algorithm: 'fixedwindow', limit: 5, param: 10, remaining: 4, resetAfterMs: 2500 });
  const bytes = limit({ name: 'up', algorithm: 'slidingwindow', limit: 100, param: 60, remaining: 40, resetAfterMs: 0, quotaUnit: 'content-bytes' });
  const headers = rateLimitHeaders(decision([quoted, bytes]));
  assert.deepEqual(headers, {
    'RateLimit-Policy': '"say \\"hi\\"\\\\now";q=5;w=10, "up";q=100;qu="content-bytes";w=60',
    RateLimit: '"say \\"hi\\"\\\\now";r=4;t=3, "up";r=40',
  });
  const members = (field: string) => parseList(field).map(([name, params]) => [name, Object.fromEntries(params as Map<string, unknown>)]);
  assert.deepEqual(members(headers['RateLimit-Policy']), [
    ['say "hi"\\now', { q: 5, w: 10 }],
    ['up', { q: 100, qu: 'content-bytes', w: 60 }],
  ]);
  assert.deepEqual(members(headers.RateLimit), [
    ['say "hi"\\now', { r: 4, t: 3 }],
    ['up', { r: 40 }],
  ]);
});

test('draft-6 and legacy: the limit closest to denial, its t as the reset (0 without one), Retry-After as in draft-10', () => {
  const a = limit({ name: 'a', algorithm: 'tokenbucket', limit: 10, param: 1, remaining: 5, resetAfterMs: 5000 });
  const b = limit({ name: 'b', algorithm: 'fixedwindow', limit: 4, param: 60, remaining: 2, resetAfterMs: 12_345 });
  const c = limit({ name: 'c', algorithm: 'slidingwindow', limit: 9, param: 60, remaining: 2, resetAfterMs: 30_000 });
  // Admitted: the fewest remaining, the first on a tie.
  assert.deepEqual(rateLimitHeaders(decision([a, b, c]), 'draft-6'), { 'RateLimit-Limit': '4', 'RateLimit-Remaining': '2', 'RateLimit-Reset': '13' });
  const now = 1_764_806_400_250; // the client's clock: rounded up to 1764806401
  assert.deepEqual(rateLimitHeaders(decision([a, b, c]), 'legacy', now), { 'X-RateLimit-Limit': '4', 'X-RateLimit-Remaining': '2', 'X-RateLimit-Reset': String(1_764_806_401 + 13) });
  // Denied: the denying limit with the longest wait; its reset is Retry-After.
  const shortWait = limit({ name: 'short', algorithm: 'tokenbucket', limit: 10, param: 1, remaining: 0, allowed: false, retryAfterMs: 800, resetAfterMs: 9800 });
  const longWait = limit({ name: 'long', algorithm: 'fixedwindow', limit: 1000, param: 86400, remaining: 0, allowed: false, retryAfterMs: 5_400_000, resetAfterMs: 5_400_000 });
  const denied = decision([a, shortWait, longWait], 5_400_000);
  assert.deepEqual(rateLimitHeaders(denied, 'draft-6'), { 'RateLimit-Limit': '1000', 'RateLimit-Remaining': '0', 'RateLimit-Reset': '5400', 'Retry-After': '5400' });
  assert.deepEqual(rateLimitHeaders(denied, 'legacy', now), { 'X-RateLimit-Limit': '1000', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': String(1_764_806_401 + 5400), 'Retry-After': '5400' });
  assert.deepEqual(rateLimitHeaders(denied, false), { 'Retry-After': '5400' });
  // The spec's example: a token bucket of 60 at 1/s, emptied.
  const emptied = limit({ name: 'default', algorithm: 'tokenbucket', limit: 60, param: 1, remaining: 0, allowed: false, retryAfterMs: 1000, resetAfterMs: 60_000 });
  assert.deepEqual(rateLimitHeaders(decision([emptied], 1000), 'draft-10'), { 'RateLimit-Policy': '"default";q=60;w=60', RateLimit: '"default";r=0;t=1', 'Retry-After': '1' });
  assert.deepEqual(rateLimitHeaders(decision([emptied], 1000), 'draft-6'), { 'RateLimit-Limit': '60', 'RateLimit-Remaining': '0', 'RateLimit-Reset': '1', 'Retry-After': '1' });
  assert.deepEqual(rateLimitHeaders(decision([emptied], 1000), 'legacy', 1_764_806_400_000), { 'X-RateLimit-Limit': '60', 'X-RateLimit-Remaining': '0', 'X-RateLimit-Reset': '1764806401', 'Retry-After': '1' });
  // Never admissible: no Retry-After, and the limit has no t (reset 0).
  const never = limit({ name: 'tokens', algorithm: 'tokenbucket', limit: 1000, param: 10, remaining: 1000, allowed: false, retryAfterMs: -1, cost: 5000 });
  assert.deepEqual(rateLimitHeaders(decision([never], -1), 'draft-6'), { 'RateLimit-Limit': '1000', 'RateLimit-Remaining': '1000', 'RateLimit-Reset': '0' });
  // A fresh limit has no t either.
  const fresh = limit({ name: 'fresh', algorithm: 'tokenbucket', limit: 3, param: 1, remaining: 3, resetAfterMs: 0, cost: 0 });
  assert.deepEqual(rateLimitHeaders(decision([fresh]), 'legacy', now), { 'X-RateLimit-Limit': '3', 'X-RateLimit-Remaining': '3', 'X-RateLimit-Reset': '1764806401' });
});

test('two limiters made separately on one request: the draft\'s lists joined, the longer Retry-After, the single-limit fields of the limit closer to denial', () => {
  const from = (fields: Record<string, string>) => (name: string) => fields[name];
  const first = { 'RateLimit-Policy': '"a";q=5;w=5', RateLimit: '"a";r=4;t=1' };
  assert.deepEqual(mergedHeaders({ 'RateLimit-Policy': '"b";q=9;w=9', RateLimit: '"b";r=8;t=1' }, from(first)), {
    'RateLimit-Policy': '"a";q=5;w=5, "b";q=9;w=9',
    RateLimit: '"a";r=4;t=1, "b";r=8;t=1',
  });
  const nothing = { 'RateLimit-Policy': '"b";q=9;w=9' };
  assert.equal(mergedHeaders(nothing, from({})), nothing);
  const earlier = { 'RateLimit-Limit': '5', 'RateLimit-Remaining': '1', 'RateLimit-Reset': '7' };
  assert.deepEqual(mergedHeaders({ 'RateLimit-Limit': '9', 'RateLimit-Remaining': '8', 'RateLimit-Reset': '1' }, from(earlier)), earlier);
  assert.deepEqual(mergedHeaders({ 'RateLimit-Limit': '9', 'RateLimit-Remaining': '0', 'RateLimit-Reset': '3' }, from(earlier)), { 'RateLimit-Limit': '9', 'RateLimit-Remaining': '0', 'RateLimit-Reset': '3' });
  const denial = { 'X-RateLimit-Limit': '9', 'X-RateLimit-Remaining': '4', 'X-RateLimit-Reset': '1764806500', 'Retry-After': '30' };
  assert.deepEqual(mergedHeaders(denial, from({ 'X-RateLimit-Limit': '5', 'X-RateLimit-Remaining': '1', 'X-RateLimit-Reset': '1764806407', 'Retry-After': '60' })), { ...denial, 'Retry-After': '60' });
});
