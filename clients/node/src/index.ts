export { checkRateLimit, commandFor, type Algorithm, type CommandSender, type Decision, type LimitOptions } from './limiter.js';
export { deniedBody, rateLimitHeaders, seconds } from './headers.js';
export { byHeader, byIp, byUser, rateLimit, type MiddlewareOptions } from './middleware.js';
