// The `mode` option against real servers: auto takes the module where the
// server has it and the Lua script where not, and decides again after a
// reconnect; module mode without the module, a user whose ACL forbids
// EVAL, a key in the other mode's layout: clear errors, nothing changed;
// script mode after SCRIPT FLUSH (NOSCRIPT, then EVAL).

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';

import { Redis } from 'ioredis';
import { createClient } from 'redis';

import { createLimiter, type Limiter, type LimiterOptions } from '../src/index.js';
import { RATELIMIT_LUA } from '../src/ratelimit-lua.js';
import { SINGLE, type AppClient } from './clients.js';
import { RedisServer } from './servers.js';

const LUA = readFileSync(resolve(import.meta.dirname, '../../../../lua/ratelimit.lua'), 'utf8');
const SHA1 = createHash('sha1').update(LUA).digest('hex');
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
    await withModule.cli('script', 'flush');
    await without.cli('script', 'flush');
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
      const check = limiter(await client(name, without), { mode: 'module', failOpen: true });
      await assert.rejects(check.check({ ip: '10.0.0.1' }), {
        name: 'RateLimitModeError',
        message:
          "ERR the redis-ratelimit module is not loaded on this Redis (unknown command 'RL.MULTI'), and mode 'module' needs it: " +
          "load it (loadmodule /path/to/libredis_ratelimit.so), or use mode 'auto' or 'script' (the Lua script)",
      });
      assert.equal(await without.cli('dbsize'), '0');
    });

    test(`${name}: NOSCRIPT after SCRIPT FLUSH: EVAL runs the call and caches the script again`, async () => {
      const check = limiter(await client(name, without), { mode: 'script', limits: { limit: 5, rate: 0.001, cost: 2 } });
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
      "NOPERM this Redis user's ACL forbids EVALSHA/EVAL, which script mode needs (it runs lua/ratelimit.lua where the " +
      'redis-ratelimit module is not loaded): allow them (ACL SETUSER <user> +evalsha +eval), or load the module';
    const USERS = {
      noeval: '+@all -eval -evalsha',
      shaonly: '+@all -eval',
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
      test(`${name}: without EVAL and EVALSHA, script mode says the ACL forbids them, in auto and script mode`, async () => {
        const redis = await connect(without, 'noeval');
        for (const mode of ['auto', 'script'] as const) {
          await assert.rejects(limiter(redis, { mode }).check({ ip: '10.0.0.1' }), { name: 'RateLimitModeError', message: EVAL_FORBIDDEN });
        }
        assert.equal(await without.cli('dbsize'), '0');
        // Where the module is loaded, auto needs no script.
        const module = limiter(await connect(withModule, 'noeval'));
        assert.equal((await module.check({ ip: '10.0.0.1' }))?.limits[0].remaining, 4);
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
