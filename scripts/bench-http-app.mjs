// One app of scripts/bench-http-node.sh: Express 5 with no limiter, ours
// (module mode, or script mode: the Lua library through FCALL),
// express-rate-limit + rate-limit-redis, or rate-limiter-flexible (bare, or
// answering what ours answers), all on one Redis with the module;
// `admitted` limits never bind, `denied` ones deny all but the first.
// Usage: node bench-http-app.mjs VARIANT PATH REDIS_URL; prints the port it
// listens on (a free one, so it never meets another process's server).
import express from 'express';
import { createClient } from 'redis';

const [variant, path, url] = process.argv.slice(2);
const admitted = path === 'admitted';
const redis = createClient({ url });
redis.on('error', () => {});
await redis.connect();
const app = express();

if (variant === 'ours' || variant === 'ours-script') {
  const { rateLimit } = await import('redis-ratelimit-client');
  const limits = admitted ? { limit: 1e12, rate: 1e9 } : { limit: 1, rate: 0.000001 };
  app.use(rateLimit({ redis, limits, ...(variant === 'ours-script' && { mode: 'script', scriptCall: 'fcall' }) }));
} else if (variant === 'express-rate-limit') {
  const { rateLimit } = await import('express-rate-limit');
  const { RedisStore } = await import('rate-limit-redis');
  app.use(rateLimit({
    windowMs: 3_600_000, limit: admitted ? 1e12 : 1, standardHeaders: 'draft-8', legacyHeaders: false,
    store: new RedisStore({ sendCommand: (...args) => redis.sendCommand(args) }),
  }));
} else if (variant === 'rate-limiter-flexible' || variant === 'rate-limiter-flexible+fields') {
  // +fields: what ours answers besides the call, written the way
  // rate-limiter-flexible's README sets headers: the two RateLimit fields,
  // our 429 body, the result on req.rateLimit and res.locals.rateLimit.
  const fields = variant.endsWith('+fields');
  const { RateLimiterRedis } = await import('rate-limiter-flexible');
  const points = admitted ? 1e12 : 1;
  const limiter = new RateLimiterRedis({ storeClient: redis, useRedisPackage: true, points, duration: 3600, inMemoryBlockOnConsumed: admitted ? 0 : 1 });
  const answer = (req, res, result) => {
    res.setHeader('RateLimit-Policy', `"default";q=${points};w=3600`);
    res.setHeader('RateLimit', `"default";r=${result.remainingPoints};t=${Math.ceil(result.msBeforeNext / 1000)}`);
    req.rateLimit = result;
    res.locals.rateLimit = result;
  };
  app.use((req, res, next) => {
    limiter.consume(req.ip).then((result) => {
      if (fields) answer(req, res, result);
      next();
    }, (rejection) => {
      if (rejection instanceof Error) return next(rejection);
      const retryAfter = Math.ceil(rejection.msBeforeNext / 1000);
      res.set('Retry-After', String(retryAfter));
      if (!fields) return res.status(429).json({ error: 'rate_limit_exceeded' });
      answer(req, res, rejection);
      res.status(429).json({ error: 'rate_limit_exceeded', message: 'Rate limit exceeded. Please try again later.', retry_after_seconds: retryAfter });
    });
  });
} else if (variant !== 'none') {
  throw new Error(`unknown variant ${variant}`);
}
app.get('/', (_req, res) => res.json({ ok: true }));
const server = app.listen(0, '127.0.0.1', (error) => {
  if (error) throw error;
  console.log(server.address().port);
});
