// The Fastify plugin: an onRequest hook for every route, a route's own
// limits (`config: { rateLimit: { limits } }`) checked with the app's in
// one call, refunds and releases when the raw response is over. Typed
// without Fastify's types.

import { mergedHeaders } from './headers.js';
import { decideRequest, settleAfter, splitOptions, type CheckedHttp, type MiddlewareOptions, type NodeResponse } from './http.js';
import type { Decision } from './decision.js';
import type { Limiter } from './limiter.js';
import { RateLimitConfigError, type Limit } from './options.js';

/** What the plugin reads of a Fastify request. */
export interface FastifyLikeRequest {
  ip?: string | undefined;
  routeOptions?: { config?: Record<PropertyKey, any> | undefined } | undefined;
  rateLimit?: Decision | undefined;
}

interface FastifyLikeReply {
  raw: NodeResponse;
  statusCode: number;
  getHeader(name: string): unknown;
  header(name: string, value: string): unknown;
  code(status: number): { send(body: unknown): unknown };
}

interface FastifyLikeInstance {
  addHook(name: string, hook: (...args: any[]) => any): unknown;
  decorateRequest?(name: string, value: unknown): unknown;
}

/** A route's config: `false` turns limiting off for it, `limits` adds its own. */
export interface RouteRateLimit<Req = any> {
  limits: Limit<Req> | Limit<Req>[];
}

const ROUTE_LIMITER = Symbol('redis-ratelimit-client.route');

async function limitRequest(limiter: Limiter<any>, http: CheckedHttp<any, any>, request: FastifyLikeRequest, reply: FastifyLikeReply) {
  const outcome = await decideRequest(limiter, http, request);
  if (outcome.action === 'unavailable') return reply.code(outcome.status).send(outcome.body);
  const fields = mergedHeaders(outcome.headers, (name) => reply.getHeader(name));
  for (const name in fields) reply.header(name, fields[name]);
  if (outcome.decision) request.rateLimit = outcome.decision;
  if (outcome.action === 'deny') {
    if (http.handler) return http.handler(request, reply, outcome.decision);
    return reply.code(outcome.status).send(outcome.body);
  }
  settleAfter(http, outcome.decision, reply.raw, limiter.log);
}

/**
 * `app.register(fastifyRateLimit, options)`: the options of the Express
 * middleware; a route adds limits with `config: { rateLimit: { limits } }`
 * or opts out with `config: { rateLimit: false }`.
 */
export function fastifyRateLimit(instance: FastifyLikeInstance, options: MiddlewareOptions<any, any>, done: (error?: Error) => void) {
  let limiter: Limiter<any>;
  let http: CheckedHttp<any, any>;
  try {
    ({ limiter, http } = splitOptions(options));
  } catch (error) {
    done(error as Error);
    return;
  }
  instance.decorateRequest?.('rateLimit', null);
  instance.addHook('onRoute', (route: { url?: string; config?: Record<PropertyKey, any> }) => {
    const own = route.config?.rateLimit as RouteRateLimit | false | undefined;
    if (own === undefined) return;
    if (own !== false && (typeof own !== 'object' || own === null || !('limits' in own))) {
      throw new RateLimitConfigError(`route ${route.url} config.rateLimit`, 'must be false or { limits: [...] }');
    }
    route.config = { ...route.config, [ROUTE_LIMITER]: own === false ? false : limiter.with(own.limits) };
  });
  instance.addHook('onRequest', async (request: FastifyLikeRequest, reply: FastifyLikeReply) => {
    const own = request.routeOptions?.config?.[ROUTE_LIMITER] as Limiter<any> | false | undefined;
    if (own === false) return;
    return limitRequest(own ?? limiter, http, request, reply);
  });
  instance.addHook('onClose', async () => limiter.close());
  done();
}

// Registered once for the whole app, not encapsulated (what fastify-plugin does).
Object.assign(fastifyRateLimit, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'redis-ratelimit-client',
});
