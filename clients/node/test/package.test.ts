// `npm pack`, then the tarball installed into a fresh app: npm takes the two
// runtime dependencies from the registry where its cache lacks them (an
// offline-only install failed on a fresh machine: `npm ci` caches tarballs,
// not the registry metadata a version range needs). Nothing of the source
// tree goes with it: imported from ES modules, from CommonJS
// (`require`), and compiled by strict TypeScript in both module modes with
// no @types at all (no Express types, no Node types).

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';

const packageDir = resolve(import.meta.dirname, '../..');
const tsc = join(packageDir, 'node_modules', 'typescript', 'bin', 'tsc');
let work: string;
let app: string;

function run(command: string, args: string[], cwd: string): string {
  return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

const SOURCE = `
  const limiter = createLimiter({ redis: createClientLike(), limits: { limit: 10, rate: 1 } });
  let message = '';
  try {
    createLimiter({ redis: createClientLike(), limits: { limit: 60 } });
  } catch (error) {
    message = (error as Error).message;
  }
  const app = rateLimit({ redis: createClientLike(), limits: [{ name: 'per-ip', limit: 5, window: 60, algorithm: 'fixedwindow' }] });
  console.log(JSON.stringify([typeof limiter.check, message, typeof app, typeof app.with, typeof fastifyRateLimit]));
`;
// A stand-in with node-redis's shape: the package only calls it on a check.
const CLIENT = `function createClientLike(): any { return { duplicate() {}, sendCommand() {}, connect() {} }; }`;
const EXPECTED = JSON.stringify(['function', 'limits.rate: required for tokenbucket (units per second)', 'function', 'function', 'function']);

before(() => {
  work = mkdtempSync(join(tmpdir(), 'ratelimit-pack-'));
  run('npm', ['pack', '--pack-destination', work, '--silent'], packageDir);
  const [tarball] = readdirSync(work).filter((name) => name.endsWith('.tgz'));
  app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'fresh-app', private: true }));
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--silent', join(work, tarball)], app);
});

after(() => rmSync(work, { recursive: true, force: true }));

test('the tarball holds the built package and no test or source files', () => {
  const listing = run('tar', ['-tzf', join(work, readdirSync(work).find((n) => n.endsWith('.tgz'))!)], work).split('\n').filter(Boolean).sort();
  assert.ok(listing.includes('package/dist/esm/index.js'));
  assert.ok(listing.includes('package/dist/esm/index.d.ts'));
  assert.ok(listing.includes('package/dist/cjs/index.js'));
  assert.ok(listing.includes('package/dist/cjs/index.d.ts'));
  assert.ok(listing.includes('package/dist/cjs/package.json'));
  assert.deepEqual(listing.filter((name) => !name.startsWith('package/dist/')), ['package/CHANGELOG.md', 'package/LICENSE', 'package/README.md', 'package/package.json']);
});

test('the installed package: MIT with its LICENSE, no install-time scripts, README links to files it has', () => {
  const installed = join(app, 'node_modules', 'redis-ratelimit-client');
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
  assert.equal(manifest.license, 'MIT');
  assert.match(readFileSync(join(installed, 'LICENSE'), 'utf8'), /^MIT License\n/);
  // npm runs these when the package is installed (prepare: from git): the built package needs none.
  for (const script of ['preinstall', 'install', 'postinstall', 'prepare']) assert.equal(manifest.scripts?.[script], undefined, script);
  const readme = readFileSync(join(installed, 'README.md'), 'utf8');
  const links = [...readme.matchAll(/\]\(([^)#]+)[^)]*\)/g)].map((m) => m[1]).filter((target) => !/^https?:/.test(target));
  for (const target of links) assert.ok(readdirSync(installed).includes(target), `README links to ${target}, which the package lacks`);
});

test('the package carries lua/ratelimit.lua, the script of script mode, exactly as the repository has it', async () => {
  const lua = readFileSync(join(packageDir, '..', '..', 'lua', 'ratelimit.lua'), 'utf8');
  const installed = join(app, 'node_modules', 'redis-ratelimit-client', 'dist');
  const esm = await import(pathToFileURL(join(installed, 'esm', 'ratelimit-lua.js')).href);
  assert.equal(esm.RATELIMIT_LUA, lua);
  assert.equal(createRequire(import.meta.url)(join(installed, 'cjs', 'ratelimit-lua.js')).RATELIMIT_LUA, lua);
});

test('installs without redis or express: only its two small dependencies', () => {
  const installed = readdirSync(join(app, 'node_modules')).filter((n) => !n.startsWith('.')).sort();
  assert.deepEqual(installed, ['ipaddr.js', 'redis-ratelimit-client', 'structured-headers']);
});

test('ES module import', () => {
  writeFileSync(join(app, 'esm.mjs'), `import { createLimiter, rateLimit, fastifyRateLimit } from 'redis-ratelimit-client';\n${CLIENT.replace('(): any', '()')}\n${SOURCE.replace(' as Error', '')}`);
  assert.equal(run('node', ['esm.mjs'], app).trim(), EXPECTED);
});

test('CommonJS require, also where require() cannot load ES modules (Node 20 before 20.19)', () => {
  writeFileSync(join(app, 'cjs.cjs'), `const { createLimiter, rateLimit, fastifyRateLimit } = require('redis-ratelimit-client');\n${CLIENT.replace('(): any', '()')}\n${SOURCE.replace(' as Error', '')}`);
  assert.equal(run('node', ['cjs.cjs'], app).trim(), EXPECTED);
  assert.equal(run('node', ['--no-experimental-require-module', 'cjs.cjs'], app).trim(), EXPECTED);
});

const PROJECTS = {
  'commonjs, NodeNext': { type: 'commonjs', module: 'NodeNext', moduleResolution: 'NodeNext' },
  'ES module, NodeNext': { type: 'module', module: 'NodeNext', moduleResolution: 'NodeNext' },
  'commonjs, classic node resolution': { type: 'commonjs', module: 'CommonJS', moduleResolution: 'Node10' },
};

for (const [mode, { type, ...options }] of Object.entries(PROJECTS)) {
  test(`strict TypeScript, ${mode} project, no @types installed`, () => {
    const dir = join(app, `ts-${mode.replace(/\W+/g, '-')}`);
    mkdirSync(dir);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type }));
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { strict: true, exactOptionalPropertyTypes: true, ...options, target: 'ES2022', types: [], noEmit: false, outDir: 'out' },
      include: ['main.ts'],
    }));
    writeFileSync(join(dir, 'main.ts'), `import { createLimiter, rateLimit, fastifyRateLimit, type Decision } from 'redis-ratelimit-client';
declare const console: { log(text: string): void };
declare const JSON: { stringify(value: unknown): string };
${CLIENT}
${SOURCE}
export const seen: Decision | undefined = undefined;
`);
    run(process.execPath, [tsc, '-p', '.'], dir);
    assert.equal(run('node', [join('out', 'main.js')], dir).trim(), EXPECTED);
  });
}
