// The Express middleware on real HTTP servers, Express 4 and Express 5,
// against a real redis-server in both modes (with the module, and without
// it running the Lua script): exact headers and bodies.

import assert from 'node:assert/strict';
import { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';

import express5 from 'express';
import express4 from 'express4';
import { createClient } from 'redis';

import { byUser, rateLimit, type MiddlewareOptions } from '../src/index.js';
import { abortingClients, BUSY, concurrencyOverHttp, Gate, Handlers, SHORT, SLOTS } from './concurrency.js';
import { headerStylesOverHttp, STYLE_LIMITS } from './header-styles.js';
import { MODES } from './modes.js';
import { fields } from './responses.js';
import { RedisServer } from './servers.js';

type Get = (path: string, headers?: Record<string, string>) => Promise<Response>;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Compile-time check: the middleware is a request handler of both Express versions, without a cast.
export function typesFit(middleware: ReturnType<typeof rateLimit>) {
  express5().use(middleware).get('/', middleware.with({ name: 'route', limit: 1, rate: 1 }));
  express4().use(middleware).get('/', middleware.with({ name: 'route', limit: 1, rate: 1 }));
}

for (const { mode, withModule } of MODES) for (const [version, express] of [['Express 4', express4], ['Express 5', express5]] as const) {
  describe(`${version}, mode ${mode}`, () => {
    let server: RedisServer;
    let redis: ReturnType<typeof createClient>;
    const closers: (() => void)[] = [];

    before(async () => {
      server = await RedisServer.start([], withModule);
      redis = createClient({ url: server.url });
      redis.on('error', () => {});
      await redis.connect();
    });
    after(async () => {
      for (const close of closers) close();
      redis.destroy();
      await server.stop();
    });
    beforeEach(async () => {
      await server.cli('flushall');
    });

    /** An app: a stand-in auth (`x-user` is the signed-in user), the routes `build` adds, an error handler. */
    async function withApp(build: (app: any, limit: (o: Omit<MiddlewareOptions, 'redis'>) => ReturnType<typeof rateLimit>) => void, body: (get: Get, url: string) => Promise<void>) {
      const app: any = express();
      app.set('trust proxy', 'loopback');
      app.use((req: any, _res: any, next: any) => {
        const id = req.get('x-user');
        if (id) req.user = { id };
        next();
      });
      build(app, (options) => {
        const middleware = rateLimit({ redis, mode, ...options });
        closers.push(() => middleware.limiter.close());
        return middleware;
      });
      app.use((error: Error, _req: any, res: any, _next: any) => {
        res.status(500).json({ error: error.message });
      });
      const http = app.listen(0);
      await new Promise((r) => http.once('listening', r));
      const { port } = http.address() as AddressInfo;
      try {
        await body((path, headers) => fetch(`http://127.0.0.1:${port}${path}`, headers ? { headers } : {}), `http://127.0.0.1:${port}`);
      } finally {
        http.close();
      }
    }

    test('RateLimit fields on every response; the 4th request gets 429 with t = Retry-After', async () => {
      await withApp(
        (app, limit) => {
          app.use(limit({ limits: { limit: 3, rate: 0.001 } }));
          app.get('/', (req: any, res: any) => res.json({ remaining: req.rateLimit.limits[0].remaining, locals: res.locals.rateLimit === req.rateLimit }));
        },
        async (get, url) => {
          for (const remaining of [2, 1, 0]) {
            const res = await get('/');
            assert.deepEqual(fields(res), { status: 200, policy: '"default";q=3;w=3000', limit: `"default";r=${remaining};t=1000`, retryAfter: null });
            assert.deepEqual(await res.json(), { remaining, locals: true });
          }
          const denied = await get('/');
          assert.deepEqual(fields(denied), { status: 429, policy: '"default";q=3;w=3000', limit: '"default";r=0;t=1000', retryAfter: '1000' });
          const body = '{"error":"rate_limit_exceeded","message":"Rate limit exceeded. Please try again later.","retry_after_seconds":1000}';
          assert.deepEqual([denied.headers.get('content-type'), denied.headers.get('content-length'), await denied.text()], ['application/json; charset=utf-8', String(body.length), body]);
          // HEAD: the same status and fields, no body.
          const head = await fetch(`${url}/`, { method: 'HEAD' });
          assert.deepEqual([fields(head), head.headers.get('content-length'), await head.text()], [fields(denied), String(body.length), '']);
        },
      );
    });

    test('req.rateLimit: after a sub-app the request left, over one other code set, on a request that is not Express\'s, never on other objects', async () => {
      let direct: ReturnType<typeof rateLimit> | undefined;
      await withApp(
        (app, limit) => {
          const sub: any = express();
          sub.use(limit({ limits: { limit: 5, rate: 0.001, name: 'sub' } }));
          app.use('/sub', sub); // handles nothing: the request goes on in the parent app
          const setElsewhere = (req: any, _res: any, next: any) => {
            req.rateLimit = 'set by other code';
            next();
          };
          app.use('/other', setElsewhere, limit({ limits: { limit: 5, rate: 0.001, name: 'other' } }));
          const show = (req: any, res: any) =>
            res.json({ name: req.rateLimit?.limits[0].name ?? null, remaining: req.rateLimit?.limits[0].remaining ?? null, locals: res.locals.rateLimit === req.rateLimit });
          for (const path of ['/sub', '/other', '/none']) app.get(path, show);
          direct = limit({ limits: { limit: 5, rate: 0.001, name: 'direct' } });
        },
        async (get) => {
          assert.deepEqual(await (await get('/sub')).json(), { name: 'sub', remaining: 4, locals: true });
          assert.deepEqual(await (await get('/other')).json(), { name: 'other', remaining: 4, locals: true });
          assert.deepEqual(await (await get('/none')).json(), { name: null, remaining: null, locals: true });
          const req: any = { ip: '10.0.0.1' };
          const res: any = { locals: {}, statusCode: 200, getHeader: () => undefined, setHeader: () => {}, once: () => {} };
          await new Promise<void>((resolve, reject) => direct!(req, res, (error) => (error ? reject(error) : resolve())));
          assert.deepEqual([Object.hasOwn(req, 'rateLimit'), req.rateLimit === res.locals.rateLimit, req.rateLimit.limits[0].remaining], [true, true, 4]);
          assert.equal(({} as any).rateLimit, undefined);
          assert.equal('rateLimit' in IncomingMessage.prototype, false);
        },
      );
    });

    test('per user and per IP in one limiter; route limits stacked with with() in the same call', async () => {
      await withApp(
        (app, limit) => {
          const limiter = limit({
            key: byUser(),
            limits: [
              { name: 'user', limit: 3, rate: 0.001 },
              { name: 'ip', limit: 5, rate: 0.001, key: (req: any) => `ip:${req.ip}` },
            ],
          });
          // A route's own limit is mounted before the app's: one RL.MULTI for all three.
          app.get('/search', limiter.with({ name: 'search', limit: 1, rate: 0.001 }), (_req: any, res: any) => res.json({ ok: 'search' }));
          app.use(limiter);
          app.get('/', (_req: any, res: any) => res.json({ ok: true }));
        },
        async (get) => {
          const search = await get('/search', { 'x-user': 'ada' });
          assert.deepEqual(fields(search), {
            status: 200,
            policy: '"user";q=3;w=3000, "ip";q=5;w=5000, "search";q=1;w=1000',
            limit: '"user";r=2;t=1000, "ip";r=4;t=1000, "search";r=0;t=1000',
            retryAfter: null,
          });
          // The search limit denies: neither the user's nor the IP's units are taken.
          const denied = await get('/search', { 'x-user': 'ada' });
          assert.deepEqual(fields(denied), {
            status: 429,
            policy: '"user";q=3;w=3000, "ip";q=5;w=5000, "search";q=1;w=1000',
            limit: '"user";r=2;t=1000, "ip";r=4;t=1000, "search";r=0;t=1000',
            retryAfter: '1000',
          });
          assert.equal(fields(await get('/', { 'x-user': 'ada' })).limit, '"user";r=1;t=1000, "ip";r=3;t=1000');
          assert.equal(fields(await get('/', { 'x-user': 'ada' })).limit, '"user";r=0;t=1000, "ip";r=2;t=1000');
          assert.equal((await get('/', { 'x-user': 'ada' })).status, 429);
          // Another user from the same address: its own user limit, the shared IP limit.
          assert.equal(fields(await get('/', { 'x-user': 'grace' })).limit, '"user";r=2;t=1000, "ip";r=1;t=1000');
          assert.equal(fields(await get('/', { 'x-user': 'linus' })).limit, '"user";r=2;t=1000, "ip";r=0;t=1000');
          const ipDenied = await get('/', { 'x-user': 'barbara' });
          assert.equal(ipDenied.status, 429);
          // barbara's own limit is fresh (no t: no quota to come back); the IP's denies.
          assert.equal(fields(ipDenied).limit, '"user";r=3, "ip";r=0;t=1000');
        },
      );
    });

    test('the app limiter mounted before a route\'s with(): the app limits are charged once, the route\'s after', async () => {
      await withApp(
        (app, limit) => {
          const limiter = limit({ limits: { name: 'app', limit: 5, rate: 0.001 } });
          app.use(limiter);
          app.get('/search', limiter.with({ name: 'search', limit: 1, rate: 0.001 }), (_req: any, res: any) => res.json({ ok: 'search' }));
          app.get('/', (_req: any, res: any) => res.json({ ok: true }));
        },
        async (get) => {
          const search = await get('/search');
          assert.deepEqual(fields(search), { status: 200, policy: '"app";q=5;w=5000, "search";q=1;w=1000', limit: '"app";r=4;t=1000, "search";r=0;t=1000', retryAfter: null });
          // Two calls in this order: the app limit took its unit before the route's denied.
          const denied = await get('/search');
          assert.deepEqual(fields(denied), { status: 429, policy: '"app";q=5;w=5000, "search";q=1;w=1000', limit: '"app";r=3;t=1000, "search";r=0;t=1000', retryAfter: '1000' });
          assert.equal(fields(await get('/')).limit, '"app";r=2;t=1000');
        },
      );
    });

    test('async key and limit functions: a quota per plan, from an async lookup', async () => {
      const plans: Record<string, number> = { ada: 3, grace: 1 };
      const lookup = async (id: string) => {
        await sleep(1);
        return plans[id] ?? 1;
      };
      await withApp(
        (app, limit) => {
          app.use(limit({
            key: async (req: any) => `user:${req.user?.id ?? 'anonymous'}`,
            limits: { name: 'plan', limit: async (req: any) => lookup(req.user?.id), rate: 0.001 },
          }));
          app.get('/', (_req: any, res: any) => res.json({ ok: true }));
        },
        async (get) => {
          for (const remaining of [2, 1, 0]) {
            assert.deepEqual(fields(await get('/', { 'x-user': 'ada' })), { status: 200, policy: '"plan";q=3;w=3000', limit: `"plan";r=${remaining};t=1000`, retryAfter: null });
          }
          assert.equal((await get('/', { 'x-user': 'ada' })).status, 429);
          assert.deepEqual(fields(await get('/', { 'x-user': 'grace' })), { status: 200, policy: '"plan";q=1;w=1000', limit: '"plan";r=0;t=1000', retryAfter: null });
          assert.equal((await get('/', { 'x-user': 'grace' })).status, 429);
        },
      );
    });

    test('behind a trusted proxy: keyed by X-Forwarded-For, IPv6 by /56', async () => {
      await withApp(
        (app, limit) => {
          app.use(limit({ limits: { limit: 2, rate: 0.001 } }));
          app.get('/', (req: any, res: any) => res.json({ key: req.rateLimit.limits[0].key }));
        },
        async (get) => {
          const first = await get('/', { 'x-forwarded-for': '2001:db8:0:12ab::1' });
          assert.deepEqual(await first.json(), { key: 'ratelimit:{ip6:2001:db8:0:1200::/56}:tokenbucket:2:0.001' });
          assert.equal((await get('/', { 'x-forwarded-for': '2001:db8:0:12cd::99' })).status, 200);
          assert.equal((await get('/', { 'x-forwarded-for': '2001:db8:0:12ff::2' })).status, 429);
          assert.equal((await get('/', { 'x-forwarded-for': '2001:db8:0:1300::1' })).status, 200);
        },
      );
    });

    test('unnamed limiters of different routes: different limits never meet, identical ones share', async () => {
      const withoutT = (res: Response) => [res.status, res.headers.get('ratelimit')?.replace(/;t=\d+$/, '')];
      await server.waitForWindowWith(1000);
      await withApp(
        (app, limit) => {
          const ok = (_req: any, res: any) => res.json({ ok: true });
          app.get('/login', limit({ limits: { algorithm: 'fixedwindow', limit: 2, window: 1000 } }), ok);
          app.get('/api', limit({ limits: { algorithm: 'fixedwindow', limit: 5, window: 1000 } }), ok);
          app.get('/search', limit({ limits: { limit: 5, rate: 0.001 } }), ok);
          app.get('/other', limit({ limits: { algorithm: 'fixedwindow', limit: 2, window: 1000 } }), ok);
        },
        async (get) => {
          const client = { 'x-forwarded-for': '203.0.113.1' };
          assert.deepEqual(withoutT(await get('/login', client)), [200, '"default";r=1']);
          assert.deepEqual(withoutT(await get('/login', client)), [200, '"default";r=0']);
          assert.equal((await get('/login', client)).status, 429);
          // Another limit of the same algorithm: a budget of its own, the logins took nothing from it.
          const api = await get('/api', client);
          assert.deepEqual([...withoutT(api), api.headers.get('ratelimit-policy')], [200, '"default";r=4', '"default";q=5;w=1000']);
          // Another algorithm: its own key, never the other's state (WRONGTYPE).
          assert.deepEqual(fields(await get('/search', client)), { status: 200, policy: '"default";q=5;w=5000', limit: '"default";r=4;t=1000', retryAfter: null });
          // The identical limit of another limiter shares the login budget.
          assert.equal((await get('/other', client)).status, 429);
          const other = { 'x-forwarded-for': '203.0.113.2' };
          assert.equal((await get('/other', other)).status, 200);
          assert.equal((await get('/login', other)).status, 200);
          assert.equal((await get('/other', other)).status, 429);
          assert.deepEqual((await server.cli('keys', '*')).split('\n').sort(), [
            'ratelimit:{ip:203.0.113.1}:fixedwindow:2:1000',
            'ratelimit:{ip:203.0.113.1}:fixedwindow:5:1000',
            'ratelimit:{ip:203.0.113.1}:tokenbucket:5:0.001',
            'ratelimit:{ip:203.0.113.2}:fixedwindow:2:1000',
          ]);
        },
      );
    });

    test('two separate limiters with one policy name on a request: a server error, not a shared key', async () => {
      await withApp(
        (app, limit) => {
          app.use(limit({ limits: { limit: 3, rate: 1 } }));
          app.use(limit({ limits: { algorithm: 'fixedwindow', limit: 3, window: 60 } }));
          app.get('/', (_req: any, res: any) => res.json({ ok: true }));
        },
        async (get) => {
          const res = await get('/');
          assert.equal(res.status, 500);
          assert.deepEqual(await res.json(), {
            error: 'name: policy "default" is used by two limiters on one request: give each its own name, or stack them with with()',
          });
        },
      );
    });

    test('an error reply goes to the error handler (500), never through', async () => {
      await server.cli('set', 'ratelimit:{ip:127.0.0.1}:tokenbucket:3:1', 'not a limiter');
      await withApp(
        (app, limit) => {
          app.use(limit({ limits: { limit: 3, rate: 1 }, log: () => assert.fail('no log line for an error reply') }));
          app.get('/', (_req: any, res: any) => res.json({ ok: true }));
        },
        async (get) => {
          const res = await get('/');
          assert.equal(res.status, 500);
          assert.match(((await res.json()) as { error: string }).error, /^WRONGTYPE/);
        },
      );
    });

    test('skip, custom status and message, custom handler', async () => {
      await withApp(
        (app, limit) => {
          app.get('/health', limit({ limits: { limit: 1, rate: 0.001 }, skip: async (req: any) => req.path === '/health' }), (_req: any, res: any) => res.json({ ok: true }));
          app.get('/plain', limit({ limits: { limit: 1, rate: 0.001, name: 'plain' }, statusCode: 503, message: 'Slow down.' }), (_req: any, res: any) => res.json({ ok: true }));
          app.get('/quiet', limit({ limits: { limit: 1, rate: 0.001, name: 'quiet' }, headers: false }), (_req: any, res: any) => res.json({ ok: true }));
          app.get('/custom', limit({ limits: { limit: 1, rate: 0.001, name: 'custom' }, handler: (_req: any, res: any, decision: any) => res.status(429).type('text').send(`wait ${decision.retryAfterMs > 0}`) }), (_req: any, res: any) => res.json({ ok: true }));
        },
        async (get) => {
          for (let i = 0; i < 3; i++) {
            const res = await get('/health');
            assert.deepEqual([res.status, res.headers.get('ratelimit')], [200, null]);
          }
          assert.equal((await get('/plain')).status, 200);
          const plain = await get('/plain');
          assert.equal(plain.status, 503);
          assert.deepEqual(await plain.json(), { error: 'rate_limit_exceeded', message: 'Slow down.', retry_after_seconds: 1000 });
          const quiet = await get('/quiet');
          assert.deepEqual([quiet.status, quiet.headers.get('ratelimit'), quiet.headers.get('ratelimit-policy')], [200, null, null]);
          const quietDenied = await get('/quiet');
          assert.deepEqual([quietDenied.status, quietDenied.headers.get('ratelimit'), quietDenied.headers.get('retry-after')], [429, null, '1000']);
          assert.equal((await get('/custom')).status, 200);
          const custom = await get('/custom');
          assert.deepEqual([custom.status, await custom.text(), custom.headers.get('retry-after')], [429, 'wait true', '1000']);
        },
      );
    });

    test('a request that can never pass gets 429 without Retry-After', async () => {
      await withApp(
        (app, limit) => {
          app.use(limit({ limits: { name: 'tokens', limit: 100, rate: 1, cost: (req: any) => Number(req.query.tokens) } }));
          app.get('/', (_req: any, res: any) => res.json({ ok: true }));
        },
        async (get) => {
          const res = await get('/?tokens=101');
          assert.deepEqual(fields(res), { status: 429, policy: '"tokens";q=100;w=100', limit: '"tokens";r=100', retryAfter: null });
          assert.deepEqual(await res.json(), {
            error: 'rate_limit_exceeded',
            message: 'This request costs more than the rate limit allows in total; it can never be admitted.',
            retry_after_seconds: null,
          });
          assert.equal((await get('/?tokens=100')).status, 200);
        },
      );
    });

    test('skipFailedRequests and skipSuccessfulRequests give the units back with RL.REFUND', async () => {
      await withApp(
        (app, limit) => {
          const failed = limit({ limits: { name: 'failed', limit: 5, rate: 0.001 }, skipFailedRequests: true });
          const succeeded = limit({ limits: { name: 'succeeded', limit: 5, rate: 0.001 }, skipSuccessfulRequests: true });
          app.get('/fail', failed, (_req: any, res: any) => res.status(404).json({ found: false }));
          app.get('/ok', failed, (_req: any, res: any) => res.json({ ok: true }));
          app.get('/login', succeeded, (req: any, res: any) => res.status(req.query.good ? 200 : 401).json({}));
        },
        async (get) => {
          for (let i = 0; i < 3; i++) assert.equal(fields(await get('/fail')).limit, '"failed";r=4;t=1000');
          await sleep(50); // the refund runs after the response
          assert.equal(fields(await get('/ok')).limit, '"failed";r=4;t=1000');
          assert.equal(fields(await get('/ok')).limit, '"failed";r=3;t=1000');
          for (let i = 0; i < 3; i++) assert.equal(fields(await get('/login?good=1')).limit, '"succeeded";r=4;t=1000');
          await sleep(50);
          assert.equal(fields(await get('/login')).limit, '"succeeded";r=4;t=1000');
          await sleep(50);
          assert.equal(fields(await get('/login')).limit, '"succeeded";r=3;t=1000');
        },
      );
    });

    test('throttle: a leaky bucket delays admitted requests by delay_ms instead of refusing them', async () => {
      await withApp(
        (app, limit) => {
          app.use(limit({ limits: { algorithm: 'leakybucket', limit: 3, rate: 5 }, throttle: true }));
          app.get('/', (req: any, res: any) => res.json({ delayMs: req.rateLimit.delayMs }));
        },
        async (get) => {
          const started = Date.now();
          const replies = await Promise.all([get('/'), get('/'), get('/')].map(async (r) => (await r).json()));
          const delays = replies.map((r: any) => r.delayMs).sort((a: number, b: number) => a - b);
          // 5 per second: queued 0, about 200 and about 400 ms behind the first.
          assert.equal(delays[0], 0);
          assert.ok(delays[1] > 150 && delays[1] <= 200, String(delays));
          assert.ok(delays[2] > 350 && delays[2] <= 400, String(delays));
          assert.ok(Date.now() - started >= delays[2]);
        },
      );
    });

    test('concurrency: 429 with qu="concurrent-requests" over the limit; the slot back after the response, a throw, a disconnect; a crashed holder\'s when its lease runs out', async () => {
      const gate = new Gate();
      await withApp(
        (app, limit) => {
          const slots = limit({ limits: SLOTS });
          app.get('/short', slots.with(SHORT), (_req: any, res: any) => res.json({ ok: true }));
          app.use(slots);
          app.get('/slow', async (_req: any, res: any) => {
            await gate.pass();
            res.json({ ok: true });
          });
          app.get('/fast', (_req: any, res: any) => res.json({ ok: true }));
          app.get('/boom', () => {
            throw new Error('boom');
          });
        },
        (_get, url) => concurrencyOverHttp({ url, server, redis, mode, gate }),
      );
    });

    test('headers: draft-10 (the default, or true), draft-6, legacy, false: each one\'s exact fields, Retry-After on every 429', async () => {
      await headerStylesOverHttp(async (headers) => {
        const app: any = express();
        const middleware = rateLimit({ redis, mode, limits: STYLE_LIMITS, ...(headers === undefined ? {} : { headers }) });
        app.use(middleware);
        app.get('/', (_req: any, res: any) => res.json({ ok: true }));
        const http = app.listen(0);
        await new Promise((r) => http.once('listening', r));
        return {
          url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
          close: async () => {
            middleware.limiter.close();
            await new Promise((r) => http.close(r));
          },
        };
      }, () => server.cli('flushall'));
    });

    test('concurrency: clients that abort at 40 ms never free a slot while its 100 ms handler runs (never above the limit of 3)', async () => {
      const handlers = new Handlers();
      await withApp(
        (app, limit) => {
          app.get('/busy', limit({ limits: BUSY }), async (_req: any, res: any) => {
            await handlers.work();
            res.json({ ok: true });
          });
        },
        (_get, url) => abortingClients({ url, server, handlers }),
      );
    });

    test('Redis too slow: fail open passes without headers; fail closed answers 503', async () => {
      const lines: string[] = [];
      await withApp(
        (app, limit) => {
          app.get('/open', limit({ limits: { limit: 5, rate: 0.001, name: 'open' }, timeoutMs: 200, log: (l) => lines.push(l) }), (_req: any, res: any) => res.json({ ok: true }));
          app.get('/closed', limit({ limits: { limit: 5, rate: 0.001, name: 'closed' }, timeoutMs: 200, failOpen: false, log: (l) => lines.push(l) }), (_req: any, res: any) => res.json({ ok: true }));
        },
        async (get) => {
          assert.equal((await get('/open')).status, 200);
          assert.equal((await get('/closed')).status, 200);
          await server.cli('client', 'pause', '1000', 'ALL');
          const open = await get('/open');
          assert.deepEqual([open.status, open.headers.get('ratelimit'), await open.json()], [200, null, { ok: true }]);
          const closed = await get('/closed');
          assert.deepEqual([closed.status, closed.headers.get('content-type'), await closed.json()], [503, 'application/json; charset=utf-8', { error: 'rate_limiter_unavailable' }]);
          assert.deepEqual(lines, [
            'rate limiter unavailable: no answer from Redis within 200 ms (letting the request through; Redis is tried again in a second)',
            'rate limiter unavailable: no answer from Redis within 200 ms (refusing it; Redis is tried again in a second)',
          ]);
          await sleep(1200); // Redis is tried again a second after the failure (a timer may fire a little early)
          // A second later the bucket has refilled a thousandth of a token: t may be a second less.
          assert.match(fields(await get('/open')).limit!, /^"open";r=3;t=(999|1000)$/);
        },
      );
    });
  });
}
