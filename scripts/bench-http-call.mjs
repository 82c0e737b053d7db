// Part of scripts/bench-http-node.sh: the limiter's call alone, without HTTP.
// Node CPU per admitted call, 10 calls in flight, of node-redis sending a
// PING (what any call on it costs at least), our command (the
// RL.TOKENBUCKET check() sends for one limit) and rate-limiter-flexible's
// script themselves, our check() (module mode and
// script mode), and rate-limiter-flexible's consume(); interleaved rounds,
// medians. Written between the bench-call markers in the README.
// CALL_ROUNDS and CALLS size it.
// Usage: node bench-http-call.mjs REDIS_URL README
import { createClient } from 'redis';
import { createLimiter } from 'redis-ratelimit-client';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { writeSection } from './bench-readme.mjs';

const [url, readme] = process.argv.slice(2);
const ROUNDS = Number(process.env.CALL_ROUNDS ?? 7);
const CALLS = Number(process.env.CALLS ?? 100_000);
const redis = createClient({ url });
await redis.connect();
await redis.flushAll();
const own = redis.duplicate(); // the limiter calls on a connection of its own too
await own.connect();
const limiter = createLimiter({ redis, limits: { limit: 1e12, rate: 1e9 } });
// Its own prefix: script mode's state is not the module's type; FCALL only (a refusal is an error, never EVALSHA in its row).
const scriptLimiter = createLimiter({ redis, limits: { limit: 1e12, rate: 1e9 }, mode: 'script', scriptCall: 'fcall', prefix: 'ratelimit-script:' });
const flexible = new RateLimiterRedis({ storeClient: redis, useRedisPackage: true, points: 1e12, duration: 3600 });
const req = { ip: '203.0.113.7' };
const key = 'ratelimit:{ip:203.0.113.7}:tokenbucket:1000000000000:1000000000';
if (typeof flexible._incrTtlLuaScript !== 'string') throw new Error("rate-limiter-flexible's script is no longer at _incrTtlLuaScript");

// The raw commands first: what node-redis costs for any call (PING), and
// for each limiter's own command without the limiter around it.
const CALLERS = {
  'node-redis sendCommand (PING)': () => own.sendCommand(['PING']),
  'node-redis sendCommand (RL.TOKENBUCKET)': () => own.sendCommand(['RL.TOKENBUCKET', key, '1000000000000', '1000000000', '*', '1']),
  "node-redis eval (rate-limiter-flexible's script)": () =>
    own.eval(flexible._incrTtlLuaScript, { keys: ['rlflx:203.0.113.8'], arguments: ['1', '3600', '1000000000000', '3600'] }),
  'ours: check() (module)': () => limiter.check(req),
  'ours: check() (script, FCALL)': () => scriptLimiter.check(req),
  'rate-limiter-flexible: consume()': () => flexible.consume(req.ip),
};

async function run(call, n) {
  let left = n;
  const caller = async () => {
    while (left-- > 0) await call();
  };
  await Promise.all(Array.from({ length: 10 }, caller));
}

/** µs of this process's CPU per call. */
async function cpuPerCall(call) {
  await run(call, CALLS / 5); // warm-up
  const before = process.cpuUsage();
  await run(call, CALLS);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / CALLS;
}

const runs = Object.fromEntries(Object.keys(CALLERS).map((name) => [name, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, call] of Object.entries(CALLERS)) runs[name].push(await cpuPerCall(call));
}
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const table = [
  `The call alone: Node CPU per admitted call, 10 in flight, ${ROUNDS} interleaved rounds of ${CALLS} calls, medians (\`make bench-http\`, ${new Date().toISOString().slice(0, 10)}, ${process.version}).`,
  '',
  '| call | CPU µs/call |',
  '|---|---|',
  ...Object.entries(runs).map(([name, values]) => `| ${name} | ${median(values).toFixed(2)} |`),
].join('\n');
console.log(table);
writeSection(readme, 'bench-call', table);
await Promise.all([redis.quit(), own.quit()]);
limiter.close();
scriptLimiter.close();
