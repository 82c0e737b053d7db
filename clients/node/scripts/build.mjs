// Builds the package twice from src/: ES modules in dist/esm and CommonJS
// in dist/cjs, each with its .d.ts. TypeScript picks a file's module format
// from the nearest package.json, so the CommonJS build compiles a copy of
// src/ under a package.json that says "commonjs" (and dist/cjs gets one too).
import './lua.mjs'; // first: lua/ratelimit.lua into src/ratelimit-lua.ts
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const options = ['--strict', '--exactOptionalPropertyTypes', '--declaration', '--esModuleInterop', '--skipLibCheck', '--target', 'ES2022',
  '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--lib', 'ES2022', '--types', 'node'];

rmSync(join(root, 'dist'), { recursive: true, force: true });
rmSync(join(root, '.build'), { recursive: true, force: true });

execFileSync(process.execPath, [tsc, ...options, '--rootDir', 'src', '--outDir', 'dist/esm', ...files('src')], { cwd: root, stdio: 'inherit' });

const cjsSource = join(root, '.build', 'cjs');
cpSync(join(root, 'src'), join(cjsSource, 'src'), { recursive: true });
writeFileSync(join(cjsSource, 'package.json'), '{ "type": "commonjs" }\n');
execFileSync(process.execPath, [tsc, ...options, '--rootDir', join(cjsSource, 'src'), '--outDir', 'dist/cjs', ...files(join(cjsSource, 'src'))], { cwd: root, stdio: 'inherit' });
mkdirSync(join(root, 'dist', 'cjs'), { recursive: true });
writeFileSync(join(root, 'dist', 'cjs', 'package.json'), '{ "type": "commonjs" }\n');
rmSync(join(root, '.build'), { recursive: true, force: true });

function files(dir) {
  return readdirSync(dir).filter((name) => name.endsWith('.ts')).map((name) => join(dir, name));
}
