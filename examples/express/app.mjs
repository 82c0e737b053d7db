// A small API behind redis-ratelimit-client: `make example`, then hit it
// with curl and watch 200s turn into 429s with the RateLimit headers.
import express from 'express';
import { createClient } from 'redis';

import { byIp, byUser, rateLimit } from 'redis-ratelimit-client';

const redis = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
redis.on('error', (error) => console.warn(`redis: ${error.message}`));
await redis.connect();

// A stand-in for real authentication: only known API keys become a user.
// Limits key by that verified user, never by whatever key a client sends.
const API_KEYS = new Map([['alice-secret', 'alice'], ['bob-secret', 'bob']]);

const app = express();
app.use((req, _res, next) => {
  const user = API_KEYS.get(req.get('x-api-key') ?? '');
  if (user) req.user = { id: user };
  next();
});

// Per user (the address for anonymous requests): bursts of 5, then one
// request every 2 seconds; per address, 20 a minute whoever signs in.
// Both in one RL.MULTI per request.
const limiter = rateLimit({
  redis,
  key: byUser(),
  limits: [
    { name: 'per-user', limit: 5, rate: 0.5 },
    { name: 'per-ip', algorithm: 'fixedwindow', limit: 20, window: 60, key: byIp() },
  ],
});
// Searching is dear: 2 per 10 seconds, exactly (sliding log), checked with the others.
app.get('/search', limiter.with({ name: 'search', algorithm: 'slidinglog', limit: 2, window: 10 }), (req, res) =>
  res.json({ results: [], q: req.query.q ?? '' }),
);
app.use(limiter);
app.get('/', (req, res) => res.json({ hello: req.user?.id ?? req.ip }));

const port = Number(process.env.PORT ?? 3000);
app.listen(port, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${port}; try:`);
  console.log(`  for i in 1 2 3 4 5 6; do curl -si http://127.0.0.1:${port}/ | grep -iE '^(HTTP|ratelimit:|retry)'; done`);
  console.log(`  curl -si -H 'x-api-key: alice-secret' 'http://127.0.0.1:${port}/search?q=redis'`);
});
