// The driver of scripts/bench-http-node.sh: interleaved rounds of each app
// on each path, autocannon against it; per run the requests/s, the app's
// CPU from /proc, Redis's CPU from INFO CPU (used_cpu_sys + used_cpu_user:
// getrusage, in µs, where /proc's utime and stime count 10 ms ticks), the
// commands Redis ran (INFO commandstats) and autocannon's p50 and p99
// latency; medians, then ratios to ours (module), written between the
// markers in the README. ROUNDS, SECONDS_PER_RUN, CONNECTIONS size it.
import { spawn, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { createClient } from 'redis';
import { writeSection } from './bench-readme.mjs';

const [appFile, redisUrl, readme] = process.argv.slice(2);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SECONDS = Number(process.env.SECONDS_PER_RUN ?? 3);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 10);
const VARIANTS = ['none', 'ours', 'ours-script', 'express-rate-limit', 'rate-limiter-flexible', 'rate-limiter-flexible+fields'];
const NAMES = { none: 'no limiter', ours: 'ours (module)', 'ours-script': 'ours (script, FCALL)' };
const PATHS = ['admitted', 'denied'];
// The command each of ours must send on the admitted path, about once a request: the row's name says it.
const SENDS = { ours: 'rl.tokenbucket', 'ours-script': 'fcall' };
const TICK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

const redis = createClient({ url: redisUrl });
await redis.connect();

const appCpuSeconds = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICK; // utime + stime
};

const infoFields = (text) => Object.fromEntries(text.split('\r\n').filter((line) => line.includes(':')).map((line) => line.split(':')));

async function redisCpuSeconds() {
  const info = infoFields(await redis.info('cpu'));
  return Number(info.used_cpu_sys) + Number(info.used_cpu_user);
}

/** Calls of each command since the last CONFIG RESETSTAT, but the driver's own (INFO, CONFIG RESETSTAT); and the µs Redis spent in the limiter's own calls. */
async function commandCalls() {
  const calls = {};
  const usec = {};
  for (const [name, stats] of Object.entries(infoFields(await redis.info('commandstats')))) {
    const command = name.replace(/^cmdstat_/, '').toLowerCase();
    if (command === 'info' || command === 'config|resetstat') continue;
    calls[command] = Number(/calls=(\d+)/.exec(stats)[1]);
    usec[command] = Number(/usec=(\d+)/.exec(stats)[1]);
  }
  return { calls, usec: limiterUsec(usec) };
}

/**
 * The µs inside the commands a limiter sent (INFO commandstats' usec): its
 * scripts (EVALSHA, EVAL, FCALL) and the module's commands, which hold the
 * time of the commands they call; a limiter without them, all its commands.
 */
function limiterUsec(usec) {
  const sent = Object.keys(usec).filter((command) => /^(evalsha|eval|fcall)(_ro)?$|^rl\./.test(command));
  return (sent.length ? sent : Object.keys(usec)).reduce((sum, command) => sum + usec[command], 0);
}

/** One run; a run whose app served nothing (it did not come up in time) is tried again, up to three times. */
async function measure(variant, path) {
  for (let attempt = 1; ; attempt++) {
    const run = await once(variant, path);
    if (run.requests > 0 || attempt === 3) return run;
    console.log(`${variant} ${path}: no request served, again`);
  }
}

async function once(variant, path) {
  await redis.flushAll();
  const child = spawn(process.execPath, [appFile, variant, path, redisUrl], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    child.stdout.once('data', (line) => resolve(Number(line)));
    child.once('exit', (code) => reject(new Error(`${variant} exited ${code}`)));
  });
  const url = `http://127.0.0.1:${port}/`;
  await autocannon({ url, connections: CONNECTIONS, duration: 1 }); // warm-up (and the first, admitted, request of the denied path)
  await redis.configResetStat();
  const appBefore = appCpuSeconds(child.pid);
  const redisBefore = await redisCpuSeconds();
  const result = await autocannon({ url, connections: CONNECTIONS, duration: SECONDS });
  const redisCpu = (await redisCpuSeconds()) - redisBefore;
  const appCpu = appCpuSeconds(child.pid) - appBefore;
  child.kill();
  const requests = result.requests.total;
  const expected = path === 'admitted' || variant === 'none' ? '2xx' : 'non2xx';
  const good = expected === '2xx' ? result['2xx'] : result.non2xx;
  if (requests === 0) console.log(`${variant} ${path}: ${result.errors} errors, ${result.timeouts} timeouts`);
  if (requests > 0 && good < requests * 0.99) throw new Error(`${variant} ${path}: ${good} of ${requests} were ${expected}`);
  const perRequest = (n) => n / Math.max(1, requests);
  const { calls, usec } = await commandCalls();
  const commands = Object.fromEntries(Object.entries(calls).map(([command, n]) => [command, perRequest(n)]));
  if (requests > 0 && path === 'admitted' && SENDS[variant] && !(commands[SENDS[variant]] >= 0.99)) {
    throw new Error(`${variant} ${path}: expected ${SENDS[variant]} for each request, Redis ran ${JSON.stringify(commands)}`);
  }
  return {
    requests,
    rps: requests / SECONDS,
    appUs: perRequest(appCpu * 1e6),
    redisUs: perRequest(redisCpu * 1e6),
    commandUs: perRequest(usec),
    commands,
    p50: result.latency.p50,
    p99: result.latency.p99,
  };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
/** Redis commands a request, as `FCALL 1.00` (the median of each command's count over the rounds). */
const commandsOf = (runs) => {
  const names = [...new Set(runs.flatMap((run) => Object.keys(run.commands)))].sort();
  const counts = names.map((name) => [name.toUpperCase(), median(runs.map((run) => run.commands[name] ?? 0))]).filter(([, n]) => n >= 0.005);
  return counts.length ? counts.map(([name, n]) => `${name} ${n.toFixed(2)}`).join(', ') : 'none';
};
const runs = {};
for (let round = 0; round < ROUNDS; round++) {
  // Each round in another order, so no app always runs first or last.
  const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]);
  for (const path of PATHS) for (const variant of order) {
    const run = await measure(variant, path);
    (runs[`${variant} ${path}`] ??= []).push(run);
    console.log(
      `round ${round + 1} ${path} ${variant}: ${run.rps.toFixed(0)} req/s, CPU/request app ${run.appUs.toFixed(1)} us, ` +
        `Redis ${run.redisUs.toFixed(2)} us (in the limiter's calls ${run.commandUs.toFixed(2)}); p50 ${run.p50} ms, p99 ${run.p99} ms; Redis commands/request: ${commandsOf([run])}`,
    );
  }
}

const rows = [];
for (const path of PATHS) {
  const figures = (variant) => {
    const these = runs[`${variant} ${path}`];
    const of = (field) => median(these.map((run) => run[field]));
    return { rps: of('rps'), appUs: of('appUs'), redisUs: of('redisUs'), commandUs: of('commandUs'), p50: of('p50'), p99: of('p99'), commands: commandsOf(these) };
  };
  const ours = figures('ours');
  // Where ours (module) asks Redis nothing (denied: its denial cache), a Redis CPU ratio would divide by Redis's idle cost.
  const oursAsks = ours.commands !== 'none';
  for (const variant of VARIANTS) {
    const f = figures(variant);
    const ratios = [f.rps / ours.rps, f.appUs / ours.appUs].map((r) => r.toFixed(2));
    ratios.push(oursAsks ? (f.redisUs / ours.redisUs).toFixed(2) : '-');
    const cells = [path, NAMES[variant] ?? variant, f.rps.toFixed(0), f.appUs.toFixed(0), f.redisUs.toFixed(1), f.commandUs.toFixed(1), f.commands, `${f.p50} / ${f.p99}`, ...ratios];
    rows.push(`| ${cells.join(' | ')} |`);
  }
}
const version = (name) => JSON.parse(readFileSync(`node_modules/${name}/package.json`, 'utf8')).version;
const libraries = ['express', 'redis', 'express-rate-limit', 'rate-limit-redis', 'rate-limiter-flexible'].map((name) => `${name} ${version(name)}`);
const table = [
  `${libraries.join(', ')}; one client address, ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds of ${SECONDS} s, medians (\`make bench-http\`, ${new Date().toISOString().slice(0, 10)}, ${process.version}, Redis ${infoFields(await redis.info('server')).redis_version}).`,
  'CPU is per request served: the app process\'s, and the Redis server\'s (INFO CPU); of the latter, the time inside the calls the limiter sent (INFO commandstats\' usec of its EVALSHA, EVAL, FCALL or RL.* calls, which hold the commands they run), the rest being Redis reading requests and writing replies. Ratios are this row / ours (module): requests/s above 1, CPU below 1 favour this row. `denied`: every request after the first is refused (express-rate-limit asks Redis each time; rate-limiter-flexible with its in-memory block, ours with its denial cache, so Redis CPU is its idle cost there and has no ratio). rate-limiter-flexible+fields: the same limiter, answering what ours answers (the two RateLimit fields, our 429 body, the result on `req.rateLimit` and `res.locals.rateLimit`).',
  '',
  '| path | variant | requests/s | app CPU µs/request | Redis CPU µs/request | of which in the limiter\'s calls | Redis commands/request, inside scripts too | p50 / p99 ms | requests/s ÷ ours | app CPU ÷ ours | Redis CPU ÷ ours |',
  '|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|',
  ...rows,
].join('\n');
console.log(table);
writeSection(readme, 'bench-http', table);
await redis.quit();
