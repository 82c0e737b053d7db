// A small API behind redis-ratelimit: `make example`, then hit it with curl
// and watch 200s turn into 429s with the RateLimit headers.
import express from 'express';
import { createClient } from 'redis';

import { byHeader, rateLimit } from 'redis-ratelimit';

const redis = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', disableOfflineQueue: true });
redis.on('error', (error) => console.warn(`redis: ${error.message}`));
await redis.connect();

const app = express();
const key = byHeader('x-api-key'); // per API key, else per address

// Searching is dear: 2 per 10 seconds, exactly (sliding log), on its own key.
app.get(
  '/search',
  rateLimit({ redis, key, legacyHeaders: true, limit: { algorithm: 'slidinglog', limit: 2, window: 10, policy: 'search', prefix: 'ratelimit:search:' } }),
);
// Everything: bursts of 5, then one request every 2 seconds (token bucket).
app.use(rateLimit({ redis, key, legacyHeaders: true, limit: { limit: 5, rate: 0.5 } }));

app.get('/', (req, res) => res.json({ hello: req.get('x-api-key') ?? req.ip }));
app.get('/search', (req, res) => res.json({ results: [], q: req.query.q ?? '' }));

const port = Number(process.env.PORT ?? 3000);
app.listen(port, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${port}; try:`);
  console.log(`  for i in 1 2 3 4 5 6 7; do curl -si http://127.0.0.1:${port}/ | grep -iE '^(HTTP|ratelimit|retry)'; done`);
  console.log(`  curl -si -H 'x-api-key: alice' 'http://127.0.0.1:${port}/search?q=redis'`);
});
