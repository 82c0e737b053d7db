// Copies lua/ratelimit.lua, the one source of script mode, into the package
// as src/ratelimit-lua.ts (a module exporting its text), so the built
// package carries it in dist/esm and dist/cjs. Run by the build and before
// the tests; test/package.test.ts fails when a shipped copy differs.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const text = readFileSync(join(root, '..', '..', 'lua', 'ratelimit.lua'), 'utf8');
writeFileSync(
  join(root, 'src', 'ratelimit-lua.ts'),
  `// Generated from lua/ratelimit.lua by scripts/lua.mjs at build time: do not edit.\n\n/** The text of lua/ratelimit.lua, run with EVALSHA (EVAL after NOSCRIPT) in script mode. */\nexport const RATELIMIT_LUA = ${JSON.stringify(text)};\n`,
);
