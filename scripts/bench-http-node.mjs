// The driver of scripts/bench-http-node.sh: interleaved rounds of each app
// on each path, autocannon against it, the app's CPU from /proc; medians,
// then ratios against ours, written between the markers in clients/node/README.md.
import { spawn, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { writeSection } from './bench-readme.mjs';

const [appFile, redisUrl, redisPort, readme] = process.argv.slice(2);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SECONDS = Number(process.env.SECONDS_PER_RUN ?? 3);
const VARIANTS = ['none', 'ours', 'express-rate-limit', 'rate-limiter-flexible', 'rate-limiter-flexible+fields'];
const PATHS = ['admitted', 'denied'];
const TICK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

const cpuSeconds = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICK; // utime + stime
};

/** One run; a run whose app served nothing (it did not come up in time) is tried again, up to three times. */
async function measure(variant, path) {
  for (let attempt = 1; ; attempt++) {
    const run = await once(variant, path, port++);
    if (run.requests > 0 || attempt === 3) return run;
    console.log(`${variant} ${path}: no request served, again`);
  }
}

async function once(variant, path, port) {
  execFileSync('redis-cli', ['-p', redisPort, 'flushall']);
  const child = spawn(process.execPath, [appFile, variant, path, redisUrl, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    child.stdout.once('data', resolve);
    child.once('exit', (code) => reject(new Error(`${variant} exited ${code}`)));
  });
  const url = `http://127.0.0.1:${port}/`;
  await autocannon({ url, connections: 10, duration: 1 }); // warm-up (and the first, admitted, request of the denied path)
  const before = cpuSeconds(child.pid);
  const result = await autocannon({ url, connections: 10, duration: SECONDS });
  const cpu = cpuSeconds(child.pid) - before;
  child.kill();
  const expected = path === 'admitted' || variant === 'none' ? '2xx' : 'non2xx';
  const good = expected === '2xx' ? result['2xx'] : result.non2xx;
  if (result.requests.total === 0 || good < result.requests.total * 0.99) {
    if (result.requests.total > 0) throw new Error(`${variant} ${path}: ${good} of ${result.requests.total} were ${expected}`);
  }
  return { requests: result.requests.total, rps: result.requests.total / SECONDS, cpuUs: (cpu * 1e6) / Math.max(1, result.requests.total) };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const runs = {};
let port = 30000 + Math.floor(Math.random() * 20000);
for (let round = 0; round < ROUNDS; round++) {
  // Each round in another order, so no app always runs first or last.
  const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]);
  for (const path of PATHS) for (const variant of order) {
    const run = await measure(variant, path);
    (runs[`${variant} ${path}`] ??= []).push(run);
    console.log(`round ${round + 1} ${path} ${variant}: ${run.rps.toFixed(0)} req/s, ${run.cpuUs.toFixed(0)} us CPU/request`);
  }
}

const rows = [];
for (const path of PATHS) {
  const ours = runs[`ours ${path}`];
  const oursRps = median(ours.map((r) => r.rps));
  const oursCpu = median(ours.map((r) => r.cpuUs));
  for (const variant of VARIANTS) {
    const rps = median(runs[`${variant} ${path}`].map((r) => r.rps));
    const cpu = median(runs[`${variant} ${path}`].map((r) => r.cpuUs));
    const ratios = variant === 'ours' ? '1.00 | 1.00' : `${(oursRps / rps).toFixed(2)} | ${(oursCpu / cpu).toFixed(2)}`;
    rows.push(`| ${path} | ${variant === 'none' ? 'no limiter' : variant} | ${rps.toFixed(0)} | ${cpu.toFixed(0)} | ${ratios} |`);
  }
}
const table = [
  `Express 5, one client address, 10 connections, ${ROUNDS} interleaved rounds of ${SECONDS} s, medians (\`make bench-http\`, ${new Date().toISOString().slice(0, 10)}, ${process.version}).`,
  'Ratios are ours / theirs: requests/s above 1 and CPU below 1 favour ours. `denied`: every request after the first is refused (express-rate-limit asks Redis each time; rate-limiter-flexible with its in-memory block, ours with its denial cache). rate-limiter-flexible+fields: the same limiter, answering what ours answers (the two RateLimit fields, our 429 body, the result on `req.rateLimit` and `res.locals.rateLimit`).',
  '',
  '| path | app | requests/s | app CPU µs/request | ours/this requests/s | ours/this CPU |',
  '|---|---|---|---|---|---|',
  ...rows,
].join('\n');
console.log(table);
writeSection(readme, 'bench-http', table);
