// The `mode` option against real servers: auto takes the module where the
// server has it and the Lua library where not, and decides again after a
// reconnect; module mode without the module, a user whose ACL forbids
// what a mode needs, a key in the other mode's layout: clear errors,
// nothing changed. Script mode through FCALL (the library loaded once,
// again after FUNCTION FLUSH, two versions side by side) or EVALSHA (after
// SCRIPT FLUSH: NOSCRIPT, then EVAL), and the fall back from one to the
// other where Functions are refused, with one log line and no failed request.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';

import { Redis } from 'ioredis';
import { createClient } from 'redis';

import { createLimiter, type Limiter, type LimiterOptions } from '../src/index.js';
import { ModeSwitch } from '../src/mode.js';
import { RATELIMIT_LUA } from '../src/ratelimit-lua.js';
import { clientKind } from '../src/redis.js';
import { scriptLibrary } from '../src/script.js';
import { SINGLE, type AppClient } from './clients.js';
import { RedisServer } from './servers.js';

const LUA = readFileSync(resolve(import.meta.dirname, '../../../../lua/ratelimit.lua'), 'utf8');
const SHA1 = createHash('sha1').update(LUA).digest('hex');
const LIBRARY = `ratelimit_${SHA1.slice(0, 12)}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Req = { ip: string };
// The limit below has no name: its key ends in what it is.
const NAME = 'tokenbucket:5:0.001';
const KEY = `ratelimit:{ip:10.0.0.1}:${NAME}`;

const made: { close(): void }[] = [];
afterEach(() => {
  for (const limiter of made.splice(0)) limiter.close();
});

function limiter(redis: unknown, options: Partial<LimiterOptions<Req>> = {}): Limiter<Req> {
  const limiter = createLimiter<Req>({ redis, limits: { limit: 5, rate: 0.001 }, log: () => {}, ...options });
  made.push(limiter);
  return limiter;
}

/** Checks until Redis answers again (after a restart). */
/** Each command's calls, rejected calls (an ACL, an unknown command) and failed calls since the last CONFIG RESETSTAT. */
async function commandStats(server: RedisServer): Promise<Record<string, { calls: number; rejected: number; failed: number }>> {
  const stats: Record<string, { calls: number; rejected: number; failed: number }> = {};
  for (const [, name, fields] of (await server.cli('info', 'commandstats')).matchAll(/^cmdstat_(\S+):(.*)$/gm)) {
    const field = (key: string) => Number(new RegExp(`${key}=(\\d+)`).exec(fields)?.[1] ?? 0);
    stats[name] = { calls: field('calls'), rejected: field('rejected_calls'), failed: field('failed_calls') };
  }
  return stats;
}

/** How often each script command was tried (run, refused or failed): fcall, function|load, evalsha, eval. */
async function scriptTries(server: RedisServer): Promise<Record<string, number>> {
  const stats = await commandStats(server);
  const tries = (name: string) => (stats[name] ? stats[name].calls + stats[name].rejected : 0);
  return { fcall: tries('fcall'), load: tries('function|load'), evalsha: tries('evalsha'), eval: tries('eval') };
}

async function checkWhenBack(limiter: Limiter<Req>, req: Req) {
  for (let i = 0; i < 100; i++) {
    const decision = await limiter.check(req);
    if (decision) return decision;
    await sleep(100);
  }
  throw new Error('Redis did not come back');
}

test('the package\'s copy of lua/ratelimit.lua is the file itself', () => {
  assert.equal(RATELIMIT_LUA, LUA);
});

describe('auto, with each client: decided per connection, and again after a reconnect', () => {
  for (const [name, connect] of Object.entries(SINGLE)) {
    test(`${name}: the module, then the script after a restart without it, then the module again`, async () => {
      const server = await RedisServer.start();
      const app = await connect(server);
      try {
        const check = limiter(app.client, { timeoutMs: 300 });
        assert.equal((await check.check({ ip: '10.0.0.1' }))?.limits[0].remaining, 4);
        assert.equal(await server.cli('type', KEY), 'ratelimit');
        for (const withModule of [false, true]) {
          await server.kill();
          server.withModule = withModule;
          await server.run(); // the same port, empty
          assert.equal((await checkWhenBack(check, { ip: '10.0.0.1' })).limits[0].remaining, 4);
          assert.equal(await server.cli('type', KEY), withModule ? 'ratelimit' : 'string');
        }
      } finally {
        await app.close();
        await server.stop();
      }
    });
  }
});

describe('one server with the module, one without', () => {
  let withModule: RedisServer;
  let without: RedisServer;
  const apps: AppClient[] = [];

  before(async () => {
    withModule = await RedisServer.start();
    without = await RedisServer.start([], false);
  });
  after(async () => {
    for (const app of apps) await app.close();
    await withModule.stop();
    await without.stop();
  });
  beforeEach(async () => {
    await withModule.cli('flushall');
    await without.cli('flushall');
    for (const server of [withModule, without]) {
      await server.cli('script', 'flush');
      await server.cli('function', 'flush');
      await server.cli('config', 'resetstat');
    }
  });

  async function client(name: keyof typeof SINGLE, server: RedisServer) {
    const app = await SINGLE[name](server);
    apps.push(app);
    return app.client;
  }

  test('auto takes the module where it is loaded and the script where not; script mode runs where the module is too', async () => {
    const cases = [
      [withModule, 'auto', 'ratelimit'],
      [without, 'auto', 'string'],
      [withModule, 'script', 'string'],
    ] as const;
    for (const [server, mode, type] of cases) {
      const check = limiter(await client('node-redis', server), { mode, prefix: `${mode}:` });
      assert.deepEqual((await check.check({ ip: '10.0.0.1' }))?.limits.map((l) => l.remaining), [4]);
      assert.deepEqual((await check.check({ ip: '10.0.0.1' }))?.limits.map((l) => l.remaining), [3]);
      assert.equal(await server.cli('type', `${mode}:{ip:10.0.0.1}:${NAME}`), type);
    }
  });

  for (const name of ['node-redis', 'ioredis'] as const) {
    test(`${name}: module mode without the module is a clear error at the first check, never a pass`, async () => {
      const check = limiter(await client(name, without), { mode: 'module', failOpen: true }); // one limit: RL.TOKENBUCKET
      await assert.rejects(check.check({ ip: '10.0.0.1' }), {
        name: 'RateLimitModeError',
        message:
          "ERR the redis-ratelimit module is not loaded on this Redis (unknown command 'RL.TOKENBUCKET'), and mode 'module' needs it: " +
          "load it (loadmodule /path/to/libredis_ratelimit.so), or use mode 'auto' or 'script' (the Lua script)",
      });
      assert.equal(await without.cli('dbsize'), '0');
    });

    test(`${name}: FCALL where the server has Functions: the library loaded once, no EVALSHA; after FUNCTION FLUSH loaded again, once`, async () => {
      const lines: string[] = [];
      const check = limiter(await client(name, without), { mode: 'script', limits: { limit: 5, rate: 0.001, cost: 2 }, log: (line) => lines.push(line) });
      assert.equal((await check.check({ ip: '10.0.0.1' }))?.limits[0].remaining, 3);
      // The first FCALL found no function: FUNCTION LOAD, then FCALL again.
      assert.deepEqual(await scriptTries(without), { fcall: 2, load: 1, evalsha: 0, eval: 0 });
      assert.equal(await without.cli('function', 'list', 'libraryname', LIBRARY), `library_name\n${LIBRARY}\nengine\nLUA\nfunctions\nname\n${LIBRARY}\ndescription\n\nflags`);
      const decision = await check.check({ ip: '10.0.0.1' });
      assert.equal(decision?.limits[0].remaining, 1);
      assert.deepEqual(await scriptTries(without), { fcall: 3, load: 1, evalsha: 0, eval: 0 });
      await without.cli('function', 'flush');
      await decision!.refund(); // RL.REFUND through FCALL, the library loaded again
      assert.deepEqual(await scriptTries(without), { fcall: 5, load: 2, evalsha: 0, eval: 0 });
      assert.equal((await check.check({ ip: '10.0.0.1' }))?.limits[0].remaining, 1);
      assert.deepEqual(await scriptTries(without), { fcall: 6, load: 2, evalsha: 0, eval: 0 });
      assert.deepEqual(lines, []);
    });

    test(`${name}: scriptCall 'evalsha': NOSCRIPT after SCRIPT FLUSH, EVAL runs the call and caches the script again; never FCALL`, async () => {
      const check = limiter(await client(name, without), { mode: 'script', scriptCall: 'evalsha', limits: { limit: 5, rate: 0.001, cost: 2 } });
      assert.equal(await without.cli('script', 'exists', SHA1), '0');
      assert.equal((await check.check({ ip: '10.0.0.1' }))?.limits[0].remaining, 3);
      assert.equal(await without.cli('script', 'exists', SHA1), '1');
      await without.cli('script', 'flush');
      const decision = await check.check({ ip: '10.0.0.1' });
      assert.equal(decision?.limits[0].remaining, 1);
      assert.equal(await without.cli('script', 'exists', SHA1), '1');
      await without.cli('script', 'flush');
      await decision!.refund(); // RL.REFUND through EVAL too
      assert.equal((await check.check({ ip: '10.0.0.1', }))?.limits[0].remaining, 1);
      assert.deepEqual(await scriptTries(without), { fcall: 0, load: 0, evalsha: 4, eval: 3 });
    });

    test(`${name}: a server without Functions (FCALL unknown, as on Redis 6.2; FUNCTION unknown): EVALSHA, one log line, no failed request`, async () => {
      for (const renamed of ['FCALL', 'FUNCTION']) {
        const old = await RedisServer.start(['--rename-command', renamed, ''], false);
        const app = await SINGLE[name](old);
        try {
          const lines: string[] = [];
          const check = limiter(app.client, { mode: 'script', log: (line) => lines.push(line) });
          for (const remaining of [4, 3, 2]) assert.equal((await check.check({ ip: '10.0.0.1' }))?.limits[0].remaining, remaining);
          assert.equal(lines.length, 1);
          assert.match(lines[0], /^rate limiter: script mode calls the Lua library with EVALSHA, not FCALL, where Redis Functions are refused: ERR unknown command '(fcall|function)'/i);
          // Decided for the node: EVALSHA from then on (EVAL once, to cache it).
          const tries = await scriptTries(old);
          assert.deepEqual([tries.evalsha, tries.eval], [3, 1]);
          const refused = await limiter(app.client, { mode: 'script', scriptCall: 'fcall' }).check({ ip: '10.0.0.1' }).catch((error: Error) => error);
          assert.ok(refused instanceof Error && refused.name === 'RateLimitModeError', String(refused));
          assert.match(refused.message, /^scriptCall 'fcall': this node refuses Redis Functions \(ERR unknown command '(fcall|function)'.*\): allow them \(ACL SETUSER <user> \+fcall \+function\|load\), or set scriptCall 'auto' to fall back to EVALSHA$/is);
        } finally {
          await app.close();
          await old.stop();
        }
      }
    });

    test(`${name}: a rolling deploy: two versions of the library side by side, each called as its own, neither replaced`, async () => {
      const next = scriptLibrary(`${RATELIMIT_LUA}-- the next version\n`);
      assert.notEqual(next.name, LIBRARY);
      const redis = await client(name, without);
      const connections = [clientKind(redis).open(), clientKind(redis).open()];
      const [current, upgraded] = [new ModeSwitch('script', 'auto', () => {}), new ModeSwitch('script', 'auto', () => {}, next)];
      try {
        await Promise.all(connections.map((c) => c.ready));
        const call = ['RL.TOKENBUCKET', KEY, '5', '0.001', '*', '1'];
        const remaining = async (modes: ModeSwitch, connection: (typeof connections)[number]) => ((await modes.send(connection, KEY, call)) as number[])[1];
        // Interleaved, as two versions of an app during a deploy: one state, each through its own library.
        assert.deepEqual([await remaining(current, connections[0]), await remaining(upgraded, connections[1]), await remaining(current, connections[0]), await remaining(upgraded, connections[1])], [4, 3, 2, 1]);
        const libraries = (await without.cli('function', 'list', 'withcode')).split('\n');
        assert.deepEqual(libraries.filter((line) => line.startsWith('ratelimit_')).sort(), [LIBRARY, next.name].sort().flatMap((n) => [n, n]).sort());
        const codes = libraries.filter((line) => line.startsWith('#!lua'));
        assert.deepEqual(codes.sort(), [`#!lua name=${LIBRARY}`, `#!lua name=${next.name}`].sort());
        // The other version's function still answers: one more would pass, leaving none.
        assert.deepEqual((await without.cli('fcall', next.name, '1', KEY, 'RL.PEEK', 'TOKENBUCKET', '5', '0.001', '*', '1')).split('\n').slice(0, 3), ['1', '0', '5']);
        assert.deepEqual(await scriptTries(without), { fcall: 7, load: 2, evalsha: 0, eval: 0 });
      } finally {
        for (const connection of connections) connection.close();
      }
    });

    test(`${name}: a key in the other mode's layout is refused with an error naming both modes, and left as it was`, async () => {
      const redis = await client(name, withModule);
      const script = limiter(redis, { mode: 'script' });
      const module = limiter(redis, { mode: 'module' });
      // Script-mode state met in module mode.
      assert.equal((await script.check({ ip: '10.0.0.1' }))?.limits[0].remaining, 4);
      const state = [await withModule.cli('get', KEY), await withModule.cli('pexpiretime', KEY)];
      assert.match(state[0], /^rl1:tb:/);
      await assert.rejects(module.check({ ip: '10.0.0.1' }), {
        name: 'RateLimitModeError',
        message:
          `WRONGTYPE ${KEY} holds a Redis string, not the redis-ratelimit module's state: script-mode state (script mode ` +
          'keeps plain Redis values) or another value; module mode cannot use it: give each mode its own key prefix',
      });
      assert.deepEqual([await withModule.cli('get', KEY), await withModule.cli('pexpiretime', KEY)], state);
      // Module-mode state met in script mode.
      assert.equal((await module.check({ ip: '10.0.0.2' }))?.limits[0].remaining, 4);
      const moduleKey = `ratelimit:{ip:10.0.0.2}:${NAME}`;
      const dump = [await withModule.cli('dump', moduleKey), await withModule.cli('pexpiretime', moduleKey)];
      await assert.rejects(script.check({ ip: '10.0.0.2' }), {
        message: "WRONGTYPE the key holds module-mode state (the redis-ratelimit module's type); script mode cannot use it: give each mode its own key prefix",
      });
      assert.deepEqual([await withModule.cli('dump', moduleKey), await withModule.cli('pexpiretime', moduleKey)], dump);
    });
  }

  describe('a user whose ACL forbids what a mode needs', () => {
    const EVAL_FORBIDDEN =
      "NOPERM this Redis user's ACL forbids EVALSHA/EVAL, which script mode needs where it cannot call the library as a Redis " +
      'Function (it runs lua/ratelimit.lua where the redis-ratelimit module is not loaded): allow them (ACL SETUSER <user> ' +
      '+evalsha +eval), or FCALL and FUNCTION LOAD (+fcall +function|load), or load the module';
    const USERS = {
      noscript: '+@all -eval -evalsha -fcall -function',
      noeval: '+@all -eval -evalsha',
      nofunction: '+@all -function',
      nofcall: '+@all -fcall',
      shaonly: '+@all -eval -fcall -function',
      nocommand: '+@all -command',
    };
    const CLIENTS = {
      'node-redis': async (server: RedisServer, user: string) => {
        const client = createClient({ url: `redis://${user}:secret@127.0.0.1:${server.port}` });
        client.on('error', () => {});
        await client.connect();
        apps.push({ client, close: async () => client.destroy() });
        return client;
      },
      ioredis: async (server: RedisServer, user: string) => {
        const client = new Redis({ port: server.port, host: '127.0.0.1', username: user, password: 'secret' });
        client.on('error', () => {});
        apps.push({ client, close: async () => client.disconnect() });
        return client;
      },
    };

    beforeEach(async () => {
      for (const server of [withModule, without]) {
        for (const [user, rules] of Object.entries(USERS)) await server.cli('acl', 'setuser', user, 'reset', 'on', '>secret', '~*', '&*', ...rules.split(' '));
      }
    });

    for (const [name, connect] of Object.entries(CLIENTS)) {
      test(`${name}: without Functions, EVAL and EVALSHA, script mode says the ACL forbids them, in auto and script mode`, async () => {
        const redis = await connect(without, 'noscript');
        for (const mode of ['auto', 'script'] as const) {
          await assert.rejects(limiter(redis, { mode }).check({ ip: '10.0.0.1' }), { name: 'RateLimitModeError', message: EVAL_FORBIDDEN });
        }
        assert.equal(await without.cli('dbsize'), '0');
        // Where the module is loaded, auto needs no script.
        const module = limiter(await connect(withModule, 'noscript'));
        assert.equal((await module.check({ ip: '10.0.0.1' }))?.limits[0].remaining, 4);
        // Without EVAL and EVALSHA but with Functions: FCALL.
        assert.equal((await limiter(await connect(without, 'noeval')).check({ ip: '10.0.0.2' }))?.limits[0].remaining, 4);
      });

      test(`${name}: without +function (FUNCTION LOAD) or +fcall: EVALSHA, one log line, no failed request; FCALL once the library is loaded for the user`, async () => {
        for (const user of ['nofunction', 'nofcall']) {
          for (const flush of ['function', 'script']) await without.cli(flush, 'flush');
          await without.cli('config', 'resetstat');
          const lines: string[] = [];
          const redis = await connect(without, user);
          const check = limiter(redis, { mode: 'script', prefix: `${user}:`, log: (line) => lines.push(line) });
          for (const remaining of [4, 3, 2]) assert.equal((await check.check({ ip: '10.0.0.1' }))?.limits[0].remaining, remaining);
          assert.equal(lines.length, 1, user);
          assert.match(lines[0], /^rate limiter: script mode calls the Lua library with EVALSHA, not FCALL, where Redis Functions are refused: NOPERM .*'(function\|load|fcall)'/);
          const tries = await scriptTries(without);
          assert.deepEqual(tries, { fcall: user === 'nofcall' ? 1 : 1, load: user === 'nofunction' ? 1 : 0, evalsha: 3, eval: 1 }, user);
          await assert.rejects(limiter(redis, { mode: 'script', scriptCall: 'fcall', prefix: `${user}:` }).check({ ip: '10.0.0.1' }), (error: Error) =>
            error.name === 'RateLimitModeError' && error.message.startsWith("scriptCall 'fcall': this node refuses Redis Functions (NOPERM "));
        }
        // An administrator loads the library: a user who may call but not load it gets FCALL.
        await without.cli('function', 'load', `#!lua name=${LIBRARY}\nlocal RATELIMIT_FUNCTION = '${LIBRARY}'\n${LUA}`);
        await without.cli('config', 'resetstat');
        const lines: string[] = [];
        const check = limiter(await connect(without, 'nofunction'), { mode: 'script', prefix: 'loaded:', log: (line) => lines.push(line) });
        assert.equal((await check.check({ ip: '10.0.0.1' }))?.limits[0].remaining, 4);
        assert.deepEqual([await scriptTries(without), lines], [{ fcall: 1, load: 0, evalsha: 0, eval: 0 }, []]);
      });

      test(`${name}: EVALSHA without EVAL works while the script is cached, and says what is missing when it is not`, async () => {
        const check = limiter(await connect(without, 'shaonly'), { mode: 'script' });
        await assert.rejects(check.check({ ip: '10.0.0.1' }), { name: 'RateLimitModeError', message: EVAL_FORBIDDEN });
        assert.equal(await without.cli('script', 'load', LUA), SHA1);
        assert.equal((await check.check({ ip: '10.0.0.1' }))?.limits[0].remaining, 4);
      });

      test(`${name}: auto needs COMMAND INFO; without it, the error says so; script mode does not need it`, async () => {
        const redis = await connect(without, 'nocommand');
        await assert.rejects(limiter(redis).check({ ip: '10.0.0.1' }), {
          name: 'RateLimitModeError',
          message:
            "NOPERM mode 'auto' asks COMMAND INFO RL.MULTI whether the redis-ratelimit module is loaded, and this Redis user's " +
            "ACL forbids it: allow it (ACL SETUSER <user> +command|info), or set mode 'module' or 'script'",
        });
        assert.equal((await limiter(redis, { mode: 'script' }).check({ ip: '10.0.0.1' }))?.limits[0].remaining, 4);
      });
    }
  });
});
