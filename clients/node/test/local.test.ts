// The in-process limiter of onUnavailable 'local' (src/local.ts) against
// the module: the same random RL.MULTI, RL.RELEASE and RL.RENEW calls, with the same
// given times, on a real server with the module and in process; every
// reply field for field. Each call runs in MULTI/EXEC with a PERSIST of its
// keys, so Redis expires nothing on its own clock while the given times run
// ahead or back (the local limiter's expiry is its own clock's, the same
// as Redis's in use).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Redis } from 'ioredis';

import { LocalLimiter, micros, share, WRONGTYPE, type LocalAlgorithm, type LocalSpec } from '../src/local.js';
import { RedisServer } from './servers.js';

const MAX = 9007199254740991;
const MAX_TIME_US = 253402300799999999n;

/** (size, rate or window or lease) per algorithm: small and large, whole and fractional, the ends of the ranges. */
const PARAMETERS: Record<LocalAlgorithm, [number, string][]> = {
  tokenbucket: [[1, '1'], [5, '0.5'], [10, '2.5'], [3, '0.001'], [MAX, '1000000'], [MAX, '9007.2'], [1, '1000000000000'], [1000000, '0.000001']],
  leakybucket: [[1, '1'], [5, '0.5'], [10, '2.5'], [3, '0.001'], [MAX, '1000000'], [1, '1000000000000'], [1000000, '0.000001']],
  fixedwindow: [[1, '1'], [5, '2'], [10, '0.25'], [3, '7.5'], [2, '0.001'], [MAX, '0.001'], [4, '1000000000000']],
  slidingwindow: [[1, '1'], [5, '2'], [10, '0.25'], [3, '7.5'], [1000, '3'], [2, '0.001'], [MAX, '1000000000000']],
  slidinglog: [[1, '1'], [5, '2'], [10, '0.25'], [3, '7.5'], [2, '0.001'], [MAX, '0.5'], [4, '1000000000000']],
  concurrency: [[1, '1'], [3, '0.5'], [5, '2.5'], [2, '0.001'], [MAX, '0.25'], [2, '1000000000000']],
};

/** Every limit above, the algorithms taking turns: any 8 in a row hold all six; the 8 seeds take 8 each, all of them. */
const LIMITS: [LocalAlgorithm, number, string][] = [];
for (let i = 0; LIMITS.length < 64; i++) {
  for (const [algorithm, choices] of Object.entries(PARAMETERS) as [LocalAlgorithm, [number, string][]][]) LIMITS.push([algorithm, ...choices[i % choices.length]]);
}

/** A small seeded generator (mulberry32): the same sequence for a seed, every run. */
function generator(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const below = (n: number) => Math.floor(next() * n);
  return { below, pick: <T>(items: readonly T[]): T => items[below(items.length)] };
}

/**
 * What one of `instances` processes is given of a limit, worked out here on
 * its own: the size divided, rounded down, at least 1; a bucket's rate
 * divided, rounded down to six decimals, at least 0.000001.
 */
function divided(spec: LocalSpec, instances: number): LocalSpec {
  const size = Number(BigInt(spec.size) / BigInt(instances)) || 1;
  if (!['tokenbucket', 'leakybucket'].includes(spec.algorithm)) return { ...spec, size };
  const [whole, fraction = ''] = spec.param.split('.');
  const millionths = BigInt(whole + fraction.padEnd(6, '0')) / BigInt(instances) || 1n;
  return { ...spec, size, param: String(Number(millionths) / 1e6) };
}

/** Each seed's number of processes sharing the limits (1: the whole limit). */
const INSTANCES = [1, 2, 3, 4, 5, 7, 1, 2];

/** A time in microseconds as the module reads it: seconds with six decimals. */
function seconds(us: bigint): string {
  return `${us / 1_000_000n}.${String(us % 1_000_000n).padStart(6, '0')}`;
}

describe('the local limiter replies as the module does', () => {
  let server: RedisServer;
  let redis: Redis;

  before(async () => {
    server = await RedisServer.start();
    redis = new Redis(server.port, '127.0.0.1');
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
  });

  /** One command and a PERSIST of its keys, atomically: its reply or its error's message. */
  async function inRedis(args: (string | number)[], keys: string[]): Promise<unknown> {
    let transaction = redis.multi().call(String(args[0]), ...args.slice(1).map(String));
    for (const key of keys) transaction = transaction.persist(key);
    const [[error, reply]] = (await transaction.exec()) as [Error | null, unknown][];
    return error ? error.message : reply;
  }

  function locally(call: () => unknown): unknown {
    try {
      return call();
    } catch (error) {
      return (error as Error).message;
    }
  }

  // Seed 0 starts at the epoch, seed 1 just before the largest time, the others now.
  for (let seed = 0; seed < 8; seed++) {
    const instances = INSTANCES[seed];
    test(`random calls, seed ${seed}: every algorithm and concurrency, several limits at once, looks, releases, renewals, time forward, repeated and back; each limit a share of ${instances}`, async () => {
      const random = generator(seed);
      await redis.flushall();
      const local = new LocalLimiter();
      const keys = new Map(LIMITS.slice(seed * 8, seed * 8 + 8).map((limit, i) => [`{k}:${i}`, limit]));
      const leaseIds = new Map<string, number[]>();
      let now = seed === 0 ? 0n : seed === 1 ? MAX_TIME_US - 700_000_000n : BigInt(Date.now()) * 1000n + BigInt(random.below(1_000_000));
      const seen = { allowed: 0, denied: 0, never: 0, released: 0, renewed: 0 };
      for (let step = 0; step < 1500; step++) {
        // Steps of a window's length too, so that units leave exactly at a window's edge.
        now += BigInt(random.pick([0, 1, random.below(1000), random.below(300_000), random.below(3_000_000), random.pick([1000, 250_000, 500_000, 1_000_000, 2_000_000])]));
        if (now > MAX_TIME_US) now = MAX_TIME_US;
        // Now and then a call from the past: the module counts it as no time passed.
        const at = random.below(8) === 0 ? now - BigInt(random.below(2_000_000)) : now;
        const callAt = at < 0n ? 0n : at;
        const concurrencyKeys = [...keys].filter(([, [algorithm]]) => algorithm === 'concurrency').map(([key]) => key);
        if (random.below(6) === 0) {
          const key = random.pick(concurrencyKeys);
          const id = random.pick([0, 1, MAX, random.below(4), ...(leaseIds.get(key) ?? [])]);
          if (random.below(2) === 0) {
            // A renewal for the limit's own lease, a shorter or a longer one, or the longest.
            const lease = random.pick([keys.get(key)![2], '0.001', '0.3', '5', '1000000000000']);
            const renewed = await inRedis(['RL.RENEW', key, id, lease, seconds(callAt)], [key]);
            assert.deepEqual(local.renew(key, id, micros(lease), callAt), renewed, `seed ${seed} step ${step}: RL.RENEW ${key} ${id} ${lease} ${seconds(callAt)}`);
            if ((renewed as number[])[0] === 1) seen.renewed++;
            continue;
          }
          const expected = await inRedis(['RL.RELEASE', key, id, seconds(callAt)], [key]);
          assert.deepEqual(local.release(key, id, callAt), expected, `seed ${seed} step ${step}: RL.RELEASE ${key} ${id} ${seconds(callAt)}`);
          if ((expected as number[])[0] === 1) seen.released++;
          continue;
        }
        const chosen = [...keys.keys()].filter(() => random.below(3) === 0).slice(0, 3);
        if (chosen.length === 0) chosen.push(random.pick([...keys.keys()]));
        const specs: LocalSpec[] = chosen.map((key) => {
          const [algorithm, size, param] = keys.get(key)!;
          const part = Number(BigInt(size) / BigInt(instances)) || 1; // the size this process gets: n around it
          const n = Math.min(MAX, random.pick([0, 1, 1, 2, random.below(Math.min(part, 12) + 1), part, part + 1, part > 1e6 ? random.below(part) : 1]));
          return { algorithm, size, param, n };
        });
        // The module gets the divided limits as this test works them out; the local limiter, its own share() of each.
        const shares = specs.map((spec) => divided(spec, instances));
        const args = ['RL.MULTI', chosen.length, ...chosen, seconds(callAt), ...shares.flatMap((s) => [s.algorithm.toUpperCase(), s.size, s.param, s.n])];
        const expected = (await inRedis(args, chosen)) as (number | number[])[];
        assert.deepEqual(local.multi(chosen, callAt, specs.map((spec) => share(spec, instances))), expected, `seed ${seed} step ${step}: ${args.join(' ')}`);
        if (expected[0] === 1) seen.allowed++;
        else if (expected[1] === -1) seen.never++;
        else seen.denied++;
        chosen.forEach((key, i) => {
          const leaseId = (expected[2 + i] as number[])[5];
          if (specs[i].algorithm === 'concurrency' && leaseId > 0) leaseIds.set(key, [...(leaseIds.get(key) ?? []), leaseId]);
        });
      }
      // The sequence went through admissions, denials, never-admissible calls and releases alike.
      assert.ok(seen.allowed > 200 && seen.denied > 50 && seen.never > 50, JSON.stringify(seen));
      assert.ok(seen.released > 0 && seen.renewed > 0, JSON.stringify(seen));
    });
  }

  test('a key holding another algorithm\'s state: WRONGTYPE, and nothing changes', async () => {
    await redis.flushall();
    const local = new LocalLimiter();
    const now = 1_700_000_000_000_000n;
    const take = ['{k}:a', '{k}:b'];
    const specs: LocalSpec[] = [{ algorithm: 'fixedwindow', size: 5, param: '60', n: 1 }, { algorithm: 'tokenbucket', size: 5, param: '1', n: 1 }];
    const args = (s: LocalSpec[]) => ['RL.MULTI', 2, ...take, seconds(now), ...s.flatMap((x) => [x.algorithm.toUpperCase(), x.size, x.param, x.n])];
    assert.deepEqual(local.multi(take, now, specs), await inRedis(args(specs), take));
    const swapped: LocalSpec[] = [specs[0], { ...specs[1], algorithm: 'leakybucket' }];
    assert.equal(await inRedis(args(swapped), take), WRONGTYPE);
    assert.equal(locally(() => local.multi(take, now, swapped)), WRONGTYPE);
    assert.equal(await inRedis(['RL.RELEASE', '{k}:a', 1, seconds(now)], []), WRONGTYPE);
    assert.equal(locally(() => local.release('{k}:a', 1, now)), WRONGTYPE);
    assert.equal(await inRedis(['RL.RENEW', '{k}:a', 1, 5, seconds(now)], []), WRONGTYPE);
    assert.equal(locally(() => local.renew('{k}:a', 1, 5_000_000n, now)), WRONGTYPE);
    // The fixed window kept its count: 3 left after one more.
    assert.deepEqual(local.multi(take, now, specs), await inRedis(args(specs), take));
    assert.deepEqual((local.multi(['{k}:a'], now, [{ ...specs[0], n: 0 }])[2] as number[]).slice(0, 2), [1, 3]);
  });
});

describe('one process\'s share of a limit (onUnavailable \'local\' with instances)', () => {
  test('size divided and rounded down, at least 1; a bucket\'s rate divided, rounded down to six decimals, at least 0.000001; windows and leases kept', () => {
    const cases: [LocalSpec, number, number, string][] = [
      [{ algorithm: 'tokenbucket', size: 40, param: '20', n: 1 }, 4, 10, '5'],
      [{ algorithm: 'tokenbucket', size: 100, param: '100', n: 1 }, 2, 50, '50'],
      [{ algorithm: 'tokenbucket', size: 5, param: '0.5', n: 1 }, 3, 1, '0.166666'],
      [{ algorithm: 'leakybucket', size: 3, param: '0.001', n: 1 }, 4, 1, '0.00025'],
      [{ algorithm: 'tokenbucket', size: 1, param: '0.000001', n: 1 }, 4, 1, '0.000001'],
      [{ algorithm: 'tokenbucket', size: MAX, param: '1000000', n: 1 }, 7, 1286742750677284, '142857.142857'],
      [{ algorithm: 'leakybucket', size: 7, param: '1.5', n: 1 }, 1, 7, '1.5'],
      [{ algorithm: 'fixedwindow', size: 10, param: '60', n: 1 }, 4, 2, '60'],
      [{ algorithm: 'slidingwindow', size: 9, param: '0.25', n: 1 }, 2, 4, '0.25'],
      [{ algorithm: 'slidinglog', size: 3, param: '7.5', n: 1 }, 4, 1, '7.5'],
      [{ algorithm: 'concurrency', size: 5, param: '2.5', n: 1 }, 2, 2, '2.5'],
    ];
    for (const [spec, instances, size, param] of cases) {
      assert.deepEqual(share(spec, instances), { ...spec, size, param }, `${spec.algorithm} ${spec.size} ${spec.param} / ${instances}`);
    }
  });
});

describe('the local limiter keeps at most `size` keys, the least recently used out', () => {
  test('a third key forgets the one used longest ago; using a key (a look too) keeps it', () => {
    const local = new LocalLimiter(2);
    const now = 1_700_000_000_000_000n;
    const spec: LocalSpec = { algorithm: 'fixedwindow', size: 3, param: '60', n: 1 };
    const remaining = (key: string, n = 1) => (local.multi([key], now, [{ ...spec, n }])[2] as number[])[1];
    assert.deepEqual([remaining('a'), remaining('b'), remaining('a')], [2, 2, 1]);
    assert.equal(remaining('c'), 2); // b was used longest ago: forgotten
    assert.deepEqual([remaining('b', 0), remaining('a', 0)], [3, 1]);
    assert.equal(remaining('a', 0), 1); // a look is a use: c goes when d comes
    assert.equal(remaining('d'), 2);
    assert.deepEqual([remaining('c', 0), remaining('a', 0)], [3, 1]);
  });
});
