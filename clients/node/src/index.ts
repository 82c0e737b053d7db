export { createLimiter, Limiter, RateLimiterUnavailable, windowSeconds, type Decision, type LimitDecision, type LimiterOptions } from './limiter.js';
export { RateLimitConfigError, type Algorithm, type Limit, type QuotaUnit } from './options.js';
export { RateLimitModeError } from './redis.js';
export type { Mode } from './mode.js';
export { byIp, byUser, ipKey, type RequestWithAddress } from './keys.js';
export { deniedBody, rateLimitHeaders, seconds, DEFAULT_MESSAGE, NEVER_MESSAGE, UNAVAILABLE_BODY } from './headers.js';
export type { HttpOptions, MiddlewareOptions } from './http.js';
export { rateLimit, type ExpressLikeNext, type ExpressLikeRequest, type ExpressLikeResponse, type ExpressRateLimit } from './express.js';
export { fastifyRateLimit, type FastifyLikeRequest, type RouteRateLimit } from './fastify.js';
