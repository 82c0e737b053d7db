// check() through the cluster clients (node-redis createCluster, ioredis
// Cluster) against a real 3-primary Redis Cluster that the test starts
// itself, in both modes: with the module, and without it (the Lua script).

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { createLimiter, type Limiter } from '../src/index.js';
import { CLUSTER, CLUSTER_AS, type AppClient } from './clients.js';
import { MODES } from './modes.js';
import { RedisCluster } from './servers.js';

type Req = { ip: string; user: string };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SHA1 = createHash('sha1').update(readFileSync(resolve(import.meta.dirname, '../../../../lua/ratelimit.lua'))).digest('hex');
const LIBRARY = `ratelimit_${SHA1.slice(0, 12)}`;

for (const { mode, withModule } of MODES) describe(`mode ${mode}`, () => {
  let cluster: RedisCluster;
  before(async () => {
    cluster = await RedisCluster.start(withModule);
  });
  after(async () => {
    await cluster.stop();
  });

  for (const [name, connect] of Object.entries(CLUSTER)) {
    describe(name, () => {
      let app: AppClient;
      let limiter: Limiter<Req>;
      const run = name.replace(/\W/g, '');

      before(async () => {
        app = await connect(cluster);
        limiter = createLimiter<Req>({
          redis: app.client,
          mode,
          prefix: `rl:${run}:`,
          key: (req) => `user:${req.user}`,
          limits: [
            { name: 'burst', limit: 2, rate: 0.001 },
            { name: 'daily', algorithm: 'slidinglog', limit: 3, window: 86400 },
            { name: 'ip', limit: 4, rate: 0.001, key: (req) => `ip:${req.ip}` },
          ],
        });
      });
      after(async () => {
        limiter.close();
        await app.close();
      });

      test('the limits of one partition key go in one RL.MULTI on their slot; other keys on theirs', async () => {
        const first = await limiter.check({ ip: '10.1.1.1', user: 'ada' });
        assert.deepEqual(first?.limits.map((l) => [l.key, l.allowed, l.remaining]), [
          [`rl:${run}:{user:ada}:burst`, true, 1],
          [`rl:${run}:{user:ada}:daily`, true, 2],
          [`rl:${run}:{ip:10.1.1.1}:ip`, true, 3],
        ]);
        // The keys sit on different nodes: the same slot per hash tag.
        assert.equal(await cluster.cli('cluster', 'keyslot', `rl:${run}:{user:ada}:burst`), await cluster.cli('cluster', 'keyslot', 'user:ada'));
        assert.equal(await cluster.cli('exists', `rl:${run}:{user:ada}:burst`), '1');
        assert.equal(await cluster.cli('exists', `rl:${run}:{ip:10.1.1.1}:ip`), '1');
        assert.equal((await limiter.check({ ip: '10.1.1.1', user: 'ada' }))?.allowed, true);
        const denied = await limiter.check({ ip: '10.1.1.1', user: 'ada' });
        assert.equal(denied?.allowed, false);
        assert.equal(Math.ceil(denied!.retryAfterMs / 1000), 1000);
        // The denial took nothing from the IP limit (refunded if its slot had taken it).
        const other = await limiter.check({ ip: '10.1.1.1', user: 'grace' });
        assert.deepEqual(other?.limits.map((l) => l.remaining), [1, 2, 1]);
      });

      test('a denial by the IP limit gives the user limits their units back', async () => {
        for (const user of ['u1', 'u2', 'u3', 'u4']) assert.equal((await limiter.check({ ip: '10.2.2.2', user }))?.allowed, true);
        const denied = await limiter.check({ ip: '10.2.2.2', user: 'u5' });
        assert.equal(denied?.allowed, false);
        assert.deepEqual(denied?.limits.map((l) => [l.name, l.allowed, l.remaining]), [
          ['burst', true, 2],
          ['daily', true, 3],
          ['ip', false, 0],
        ]);
        // u5 was charged nothing: from another address, its limits are fresh.
        const again = await limiter.check({ ip: '10.3.3.3', user: 'u5' });
        assert.deepEqual(again?.limits.map((l) => l.remaining), [1, 2, 3]);
      });

      test('an error reply on one slot: a server error, and the other slot\'s units are given back', async () => {
        await cluster.cli('set', `rl:${run}:{ip:10.5.5.5}:ip`, 'not a limiter');
        await assert.rejects(limiter.check({ ip: '10.5.5.5', user: 'w1' }), /WRONGTYPE/);
        const fresh = await limiter.check({ ip: '10.6.6.6', user: 'w1' });
        assert.deepEqual(fresh?.limits.map((l) => l.remaining), [1, 2, 3]);
      });

      test('a concurrency limit: its lease released on its key\'s node; released again when a limit on another node denies', async () => {
        const slots = createLimiter<Req>({
          redis: app.client,
          mode,
          prefix: `rl:${run}:slots:`,
          key: (req) => `user:${req.user}`,
          limits: [{ name: 'slots', algorithm: 'concurrency', limit: 2, lease: 30 }, { name: 'ip', limit: 1, rate: 0.001, key: (req) => `ip:${req.ip}` }],
        });
        try {
          const key = `rl:${run}:slots:{user:ada}:slots`;
          const owner = await cluster.ownerOf(key);
          let ip = '';
          for (let i = 1; ip === ''; i++) {
            if ((await cluster.ownerOf(`rl:${run}:slots:{ip:10.10.0.${i}}:ip`)).port !== owner.port) ip = `10.10.0.${i}`;
          }
          const ipKey = `rl:${run}:slots:{ip:${ip}}:ip`;
          const first = await slots.check({ ip, user: 'ada' });
          assert.deepEqual(first?.limits.map((l) => [l.key, l.allowed, l.remaining, l.leaseId]), [[key, true, 1, 1], [ipKey, true, 0, undefined]]);
          assert.equal(await owner.cli('exists', key), '1');
          await first!.release();
          assert.equal(await owner.cli('exists', key), '0'); // released where it was held: the last lease gone, the key too
          // The IP limit denies on its node after the user's slot took a lease on another: the lease is released.
          const denied = await slots.check({ ip, user: 'ada' });
          assert.equal(denied?.allowed, false);
          assert.deepEqual(denied?.limits.map((l) => [l.key, l.allowed, l.remaining, l.leaseId]), [[key, true, 2, 0], [ipKey, false, 0, undefined]]);
          assert.equal(await owner.cli('exists', key), '0');
        } finally {
          slots.close();
        }
      });

      test('a slot moved to another node: the calls follow it, the state moved with it', async () => {
        const user = `mover-${run}`;
        assert.deepEqual((await limiter.check({ ip: '10.7.7.7', user }))?.limits.map((l) => l.remaining), [1, 2, 3]);
        const before = await cluster.ownerOf(`rl:${run}:{user:${user}}:burst`);
        await cluster.moveSlotOf(`rl:${run}:{user:${user}}:burst`);
        assert.notEqual((await cluster.ownerOf(`rl:${run}:{user:${user}}:burst`)).port, before.port);
        assert.deepEqual((await limiter.check({ ip: '10.7.7.7', user }))?.limits.map((l) => l.remaining), [0, 1, 2]);
        assert.equal((await limiter.check({ ip: '10.7.7.7', user }))?.allowed, false);
      });

      test(`mode auto takes the ${mode === 'module' ? 'module' : 'script'} on every node; script mode loads the library on each node (FCALL, then FUNCTION LOAD once), again after FUNCTION FLUSH; scriptCall 'evalsha' caches the script on each (NOSCRIPT, then EVAL)`, async () => {
        await Promise.all(cluster.nodes.flatMap((node) => [node.cli('script', 'flush'), node.cli('function', 'flush')]));
        const auto = createLimiter<Req>({ redis: app.client, prefix: `rl:${run}:auto:`, key: (req) => `user:${req.user}`, limits: { name: 'n', limit: 2, rate: 0.001 } });
        const evalsha = createLimiter<Req>({ redis: app.client, mode: 'script', scriptCall: 'evalsha', prefix: `rl:${run}:sha:`, key: (req) => `user:${req.user}`, limits: { name: 'n', limit: 2, rate: 0.001 } });
        try {
          const owners = new Map<number, string>();
          for (let i = 0; owners.size < 3; i++) {
            const key = `rl:${run}:auto:{user:u${i}}:n`;
            assert.deepEqual((await auto.check({ ip: '10.8.8.8', user: `u${i}` }))?.limits.map((l) => l.remaining), [1]);
            assert.equal(await cluster.cli('type', key), mode === 'module' ? 'ratelimit' : 'string');
            owners.set((await cluster.ownerOf(key)).port, `u${i}`);
          }
          const libraries = () => Promise.all(cluster.nodes.map((node) => node.cli('function', 'list', 'libraryname', LIBRARY)));
          const loaded = mode === 'module' ? '' : LIBRARY;
          assert.deepEqual((await libraries()).map((list) => list.split('\n')[1] ?? ''), [loaded, loaded, loaded]);
          assert.deepEqual(await Promise.all(cluster.nodes.map((node) => node.cli('script', 'exists', SHA1))), ['0', '0', '0']);
          if (mode === 'script') {
            // One node loses its libraries: the next call there loads it again, and runs.
            const [port, user] = [...owners][0];
            const node = cluster.nodes.find((n) => n.port === port)!;
            await node.cli('function', 'flush');
            assert.deepEqual((await auto.check({ ip: '10.8.8.8', user }))?.limits.map((l) => l.remaining), [0]);
            assert.deepEqual((await libraries()).map((list) => list.split('\n')[1]), [LIBRARY, LIBRARY, LIBRARY]);
          }
          for (let i = 0; (await Promise.all(cluster.nodes.map((node) => node.cli('script', 'exists', SHA1)))).includes('0'); i++) {
            assert.ok(i < 100, 'the script cached on every node');
            assert.deepEqual((await evalsha.check({ ip: '10.8.8.8', user: `s${i}` }))?.limits.map((l) => l.remaining), [1]);
          }
        } finally {
          auto.close();
          evalsha.close();
        }
      });

      if (!withModule) {
        test('a user without +function on every node: EVALSHA on each, one log line, no failed request', async () => {
          await Promise.all(cluster.nodes.flatMap((node) => [node.cli('function', 'flush'), node.cli('acl', 'setuser', 'nofunction', 'reset', 'on', '>secret', '~*', '&*', '+@all', '-function')]));
          const user = await CLUSTER_AS[name](cluster, 'nofunction');
          const lines: string[] = [];
          const limited = createLimiter<Req>({ redis: user.client, mode, prefix: `rl:${run}:acl:`, key: (req) => `user:${req.user}`, limits: { name: 'n', limit: 2, rate: 0.001 }, log: (line) => lines.push(line) });
          try {
            const owners = new Set<number>();
            for (let i = 0; owners.size < 3; i++) {
              assert.ok(i < 100);
              assert.deepEqual((await limited.check({ ip: '10.8.8.9', user: `a${i}` }))?.limits.map((l) => l.remaining), [1]);
              owners.add((await cluster.ownerOf(`rl:${run}:acl:{user:a${i}}:n`)).port);
            }
            assert.equal(lines.length, 1);
            assert.match(lines[0], /^rate limiter: script mode calls the Lua library with EVALSHA, not FCALL, where Redis Functions are refused: NOPERM /);
            assert.deepEqual(await Promise.all(cluster.nodes.map((node) => node.cli('function', 'list'))), ['', '', '']);
          } finally {
            limited.close();
            await user.close();
          }
        });
      }

      if (withModule) {
        test('mode auto, a node restarted without the module, then with it: decided again for that node', async () => {
          const auto = createLimiter<Req>({ redis: app.client, prefix: `rl:${run}:restart:`, key: (req) => `user:${req.user}`, limits: { name: 'n', limit: 2, rate: 0.001 }, timeoutMs: 300, log: () => {} });
          const key = `rl:${run}:restart:{user:ada}:n`;
          const node = await cluster.ownerOf(key);
          try {
            assert.deepEqual((await auto.check({ ip: '10.9.9.9', user: 'ada' }))?.limits.map((l) => l.remaining), [1]);
            assert.equal(await cluster.cli('type', key), 'ratelimit');
            for (const loaded of [false, true]) {
              await node.kill();
              node.withModule = loaded;
              await node.run(); // the same port and cluster config; its keys are gone
              let decision = null;
              for (let i = 0; i < 100 && decision === null; i++) {
                decision = await auto.check({ ip: '10.9.9.9', user: 'ada' }); // null while it is down or rejoins
                if (decision === null) await sleep(100);
              }
              assert.deepEqual(decision?.limits.map((l) => l.remaining), [1]);
              assert.equal(await cluster.cli('type', key), loaded ? 'ratelimit' : 'string');
            }
          } finally {
            auto.close();
            if (!node.withModule) {
              // Failed halfway: the tests after this one need the module back.
              await node.kill();
              node.withModule = true;
              await node.run();
            }
          }
        });
      }

      test('a per-slot call that timed out (its node busy for 1.5 s) never charges later: its late reply is undone, the other slot\'s units given back at once', async () => {
        const lines: string[] = [];
        const late = createLimiter<Req>({
          redis: app.client,
          mode,
          prefix: `rl:${run}:late:`,
          key: (req) => `user:${req.user}`,
          limits: [
            { name: 'burst', limit: 5, rate: 0.001 },
            { name: 'slots', algorithm: 'concurrency', limit: 3, lease: 30, onUnavailable: 'open' },
            { name: 'ip', limit: 5, rate: 0.001, key: (req) => `ip:${req.ip}` },
          ],
          timeoutMs: 500,
          log: (line) => lines.push(line),
        });
        try {
          const owner = await cluster.ownerOf(`rl:${run}:late:{user:ada}:burst`);
          let ip = '';
          for (let i = 1; ip === ''; i++) {
            if ((await cluster.ownerOf(`rl:${run}:late:{ip:10.12.0.${i}}:ip`)).port !== owner.port) ip = `10.12.0.${i}`;
          }
          const remaining = (d: { limits: { remaining: number }[] } | null) => d?.limits.map((l) => l.remaining);
          assert.deepEqual(remaining(await late.check({ ip, user: 'ada' })), [4, 2, 4]);
          const { done } = await owner.busyFor(1500);
          assert.equal(await late.check({ ip, user: 'ada' }), null); // every limit 'open'
          assert.deepEqual(lines, ['rate limiter unavailable: no answer from Redis within 500 ms (letting the request through; Redis is tried again in a second)']);
          await done;
          await sleep(100);
          let decision = null;
          for (let i = 0; i < 50 && decision === null; i++) {
            decision = await late.check({ ip, user: 'ada' });
            if (decision === null) await sleep(100);
          }
          // The first check's units and lease, and this one's: nothing of the timed-out one on either node.
          assert.deepEqual(remaining(decision), [3, 1, 3]);
        } finally {
          late.close();
        }
      });

      test('no answer in time: fail open, and the paused calls never charge later', async () => {
        const lines: string[] = [];
        const slow = createLimiter<Req>({
          redis: app.client,
          mode,
          prefix: `rl:${run}:slow:`,
          key: (req) => `user:${req.user}`,
          limits: [{ name: 'burst', limit: 5, rate: 0.001 }, { name: 'ip', limit: 5, rate: 0.001, key: (req) => `ip:${req.ip}` }],
          timeoutMs: 300,
          log: (line) => lines.push(line),
        });
        try {
          assert.deepEqual((await slow.check({ ip: '10.4.4.4', user: 'ada' }))?.limits.map((l) => l.remaining), [4, 4]);
          await Promise.all(cluster.nodes.map((node) => node.cli('client', 'pause', '1000', 'ALL')));
          assert.equal(await slow.check({ ip: '10.4.4.4', user: 'ada' }), null);
          assert.deepEqual(lines, ['rate limiter unavailable: no answer from Redis within 300 ms (letting the request through; Redis is tried again in a second)']);
          await sleep(1200);
          let decision = null;
          for (let i = 0; i < 50 && decision === null; i++) {
            decision = await slow.check({ ip: '10.4.4.4', user: 'ada' });
            if (decision === null) await sleep(100);
          }
          assert.deepEqual(decision?.limits.map((l) => l.remaining), [3, 3]);
        } finally {
          slow.close();
        }
      });
    });
  }
});
