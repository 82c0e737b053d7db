// The `headers` option over real HTTP, run by the Express and the Fastify
// tests on their own apps: each choice's exact fields on admitted requests
// and on the 429, Retry-After on every 429 that can pass later.

import assert from 'node:assert/strict';

import type { MiddlewareOptions } from '../src/index.js';

/** Two buckets per client: "burst" (3, binding first) and "hour" (5), both at 0.001/s, so t is 1000 s to the second. */
export const STYLE_LIMITS: MiddlewareOptions['limits'] = [
  { name: 'hour', limit: 5, rate: 0.001 },
  { name: 'burst', limit: 3, rate: 0.001 },
];

/** An app limited by STYLE_LIMITS with `headers` set so (left out when undefined), serving GET /; `close` stops it. */
export type StartApp = (headers: MiddlewareOptions['headers'] | undefined) => Promise<{ url: string; close(): Promise<void> }>;

/** The rate limit fields of a response, by lower-case name. */
function rateFields(res: Response): Record<string, string> {
  const fields: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (/^(x-)?ratelimit|^retry-after$/.test(name)) fields[name] = value;
  });
  return fields;
}

/** Four requests from one client: three admitted (burst 2, 1, 0 left; hour 4, 3, 2), the fourth denied by burst. */
async function fourRequests(url: string): Promise<{ status: number; fields: Record<string, string>; before: number; after: number }[]> {
  const answers = [];
  for (let i = 0; i < 4; i++) {
    const before = Date.now();
    const res = await fetch(`${url}/`);
    const after = Date.now();
    await res.arrayBuffer();
    answers.push({ status: res.status, fields: rateFields(res), before, after });
  }
  return answers;
}

export async function headerStylesOverHttp(start: StartApp, flushall: () => Promise<unknown>) {
  for (const headers of [undefined, true, 'draft-10'] as const) {
    await flushall();
    const app = await start(headers);
    try {
      const answers = await fourRequests(app.url);
      const policy = '"hour";q=5;w=5000, "burst";q=3;w=3000';
      assert.deepEqual(answers.map(({ status, fields }) => [status, fields]), [
        [200, { 'ratelimit-policy': policy, ratelimit: '"hour";r=4;t=1000, "burst";r=2;t=1000' }],
        [200, { 'ratelimit-policy': policy, ratelimit: '"hour";r=3;t=1000, "burst";r=1;t=1000' }],
        [200, { 'ratelimit-policy': policy, ratelimit: '"hour";r=2;t=1000, "burst";r=0;t=1000' }],
        [429, { 'ratelimit-policy': policy, ratelimit: '"hour";r=2;t=1000, "burst";r=0;t=1000', 'retry-after': '1000' }],
      ], `headers: ${String(headers)}`);
    } finally {
      await app.close();
    }
  }

  // The draft's earlier fields: one limit, the closest to denial (burst, the fewest left; on the 429 the denying one).
  await flushall();
  let app = await start('draft-6');
  try {
    assert.deepEqual((await fourRequests(app.url)).map(({ status, fields }) => [status, fields]), [
      [200, { 'ratelimit-limit': '3', 'ratelimit-remaining': '2', 'ratelimit-reset': '1000' }],
      [200, { 'ratelimit-limit': '3', 'ratelimit-remaining': '1', 'ratelimit-reset': '1000' }],
      [200, { 'ratelimit-limit': '3', 'ratelimit-remaining': '0', 'ratelimit-reset': '1000' }],
      [429, { 'ratelimit-limit': '3', 'ratelimit-remaining': '0', 'ratelimit-reset': '1000', 'retry-after': '1000' }],
    ]);
  } finally {
    await app.close();
  }

  // GitHub's: the reset as Unix seconds, the client's clock rounded up plus t.
  await flushall();
  app = await start('legacy');
  try {
    const answers = await fourRequests(app.url);
    for (const [i, { status, fields, before, after }] of answers.entries()) {
      const reset = Number(fields['x-ratelimit-reset']);
      assert.ok(reset >= Math.ceil(before / 1000) + 1000 && reset <= Math.ceil(after / 1000) + 1000, `${reset} for ${before}..${after}`);
      const expected: Record<string, string> = { 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': String(Math.max(0, 2 - i)), 'x-ratelimit-reset': String(reset) };
      if (i === 3) expected['retry-after'] = '1000';
      assert.deepEqual([status, fields], [i === 3 ? 429 : 200, expected]);
    }
  } finally {
    await app.close();
  }

  // None: only the 429's Retry-After.
  await flushall();
  app = await start(false);
  try {
    assert.deepEqual((await fourRequests(app.url)).map(({ status, fields }) => [status, fields]), [[200, {}], [200, {}], [200, {}], [429, { 'retry-after': '1000' }]]);
  } finally {
    await app.close();
  }
}
