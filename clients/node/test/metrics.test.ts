// Metrics through OpenTelemetry's API, read back from a real SDK's reader,
// and the onDecision hook, against a real redis-server in both modes, also
// stopped: every outcome, the Redis call's duration, a hook that throws.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { metrics } from '@opentelemetry/api';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { createClient } from 'redis';

import { createLimiter, RateLimiterUnavailable, type DecisionEvent } from '../src/index.js';
import { metricsLoaded } from '../src/metrics.js';
import { MODES } from './modes.js';
import { RedisServer } from './servers.js';

class Reader extends MetricReader {
  protected async onForceFlush() {}
  protected async onShutdown() {}
}

const reader = new Reader();
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));

/** The counter's values and the histogram's counts, by their attributes, as the SDK collected them. */
async function collected() {
  const { resourceMetrics } = await reader.collect();
  const found = resourceMetrics.scopeMetrics.filter((s) => s.scope.name === 'redis-ratelimit-client').flatMap((s) => s.metrics);
  const decisions: Record<string, number> = {};
  const durations: Record<string, number> = {};
  for (const metric of found) {
    for (const point of metric.dataPoints as any[]) {
      if (metric.descriptor.name === 'ratelimit.decisions') {
        decisions[`${point.attributes['ratelimit.policy']} ${point.attributes['ratelimit.outcome']}`] = point.value;
      } else if (metric.descriptor.name === 'ratelimit.redis.duration') {
        assert.equal(metric.descriptor.unit, 's');
        durations[point.attributes['ratelimit.result']] = point.value.count;
      }
    }
  }
  return { decisions, durations };
}

for (const { mode, withModule } of MODES) {
  describe(`metrics and onDecision, mode ${mode}`, () => {
    let server: RedisServer;
    let redis: ReturnType<typeof createClient>;

    before(async () => {
      await metricsLoaded;
      server = await RedisServer.start([], withModule);
      redis = createClient({ url: server.url });
      redis.on('error', () => {});
      await redis.connect();
    });
    after(async () => {
      redis.destroy();
      await server.stop();
    });

    test('every outcome counted by policy, the Redis call timed, each decision given to the hook', async () => {
      const before = await collected();
      const events: DecisionEvent[] = [];
      const lines: string[] = [];
      const policy = `p-${mode}`;
      const open = createLimiter({ redis, mode, limits: [{ name: policy, limit: 2, rate: 0.001 }, { name: 'tokens', limit: 100, rate: 0.001 }], onDecision: (e) => events.push(e), log: (l) => lines.push(l) });
      const closed = createLimiter({ redis, mode, limits: { name: `closed-${mode}`, limit: 2, rate: 0.001 }, onUnavailable: 'closed', log: () => {}, onDecision: () => {
        throw new Error('a broken hook');
      } });
      for (let i = 0; i < 5; i++) await open.check({ ip: '10.9.0.1' }); // 2 allowed, 1 denied by Redis, 2 in process
      await closed.check({ ip: '10.9.0.1' });
      await server.kill();
      assert.equal(await open.check({ ip: '10.9.0.2' }), null);
      await assert.rejects(closed.check({ ip: '10.9.0.2' }), RateLimiterUnavailable);
      await server.run();
      open.close();
      closed.close();

      assert.deepEqual(events.map((e) => [e.outcome, e.decision?.allowed ?? null, e.durationMs === null, e.error === null]), [
        ['allowed', true, false, true],
        ['allowed', true, false, true],
        ['denied', false, false, true],
        ['denied_in_process', false, true, true],
        ['denied_in_process', false, true, true],
        ['unavailable_open', null, false, false],
      ]);
      assert.ok(events.every((e) => e.durationMs === null || e.durationMs >= 0));
      assert.deepEqual(lines.filter((l) => l.includes('onDecision')), []);

      const now = await collected();
      const grown = (table: 'decisions' | 'durations', key: string) => (now[table][key] ?? 0) - (before[table][key] ?? 0);
      const both = `${policy},tokens`;
      assert.deepEqual(
        [grown('decisions', `${both} allowed`), grown('decisions', `${both} denied`), grown('decisions', `${both} denied_in_process`), grown('decisions', `${both} unavailable_open`)],
        [2, 1, 2, 1],
      );
      assert.deepEqual([grown('decisions', `closed-${mode} allowed`), grown('decisions', `closed-${mode} unavailable_closed`)], [1, 1]);
      // Calls made: 3 + 1 answered, 2 that failed (the in-process denials made none).
      assert.deepEqual([grown('durations', 'ok'), grown('durations', 'error')], [4, 2]);
    });

    test('a hook that throws is logged and the request goes on', async () => {
      const lines: string[] = [];
      const limiter = createLimiter({ redis, mode, limits: { name: `hook-${mode}`, limit: 2, rate: 0.001 }, log: (l) => lines.push(l), onDecision: () => {
        throw new Error('a broken hook');
      } });
      const decision = await limiter.check({ ip: '10.9.0.3' });
      limiter.close();
      assert.equal(decision?.allowed, true);
      assert.deepEqual(lines, ['rate limiter onDecision hook threw: Error: a broken hook']);
    });
  });
}
