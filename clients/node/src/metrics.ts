// What the limiter reports of each decision: OpenTelemetry metrics through
// @opentelemetry/api when the app has it installed (a no-op without an SDK),
// and the app's own onDecision hook.

import type { Decision } from './decision.js';

export type Outcome =
  | 'allowed'
  | 'denied'
  | 'denied_in_process'
  | 'unavailable_open'
  | 'unavailable_closed'
  | 'unavailable_local_allowed'
  | 'unavailable_local_denied';

/** What onDecision gets for each request the limiter decided. */
export interface DecisionEvent {
  outcome: Outcome;
  /** null when Redis could not answer (unless onUnavailable `local` decided in process). */
  decision: Decision | null;
  /** How long the Redis call took; null when none was made (answered in process, or Redis waiting for its next try). */
  durationMs: number | null;
  /** Why Redis could not answer, when it could not. */
  error: unknown;
}

/** How a Redis call ended, for the duration histogram. */
export type CallResult = 'ok' | 'error' | 'timeout';

interface Instruments {
  decisions: { add(value: number, attributes: Record<string, string>): void };
  duration: { record(value: number, attributes: Record<string, string>): void };
}

type Api = { metrics: { getMeter(name: string): any } };

// Loaded once per process, if installed: an optional peer dependency.
let api: Api | null | undefined;
const loading = import('@opentelemetry/api' as string).then(
  (module: any) => (api = (module.metrics ? module : module.default) as Api),
  () => (api = null),
);
/** Settles once @opentelemetry/api was loaded or found missing (tests wait for it). */
export const metricsLoaded: Promise<unknown> = loading;

export class Metrics {
  private instruments: Instruments | undefined;

  constructor(
    private readonly hook: ((event: DecisionEvent) => void) | undefined,
    private readonly log: (line: string) => void,
  ) {}

  /** The meter is asked for on first use, so an SDK the app registers at start-up is the one used. */
  private get meter(): Instruments | undefined {
    if (this.instruments === undefined && api) {
      const meter = api.metrics.getMeter('redis-ratelimit-client');
      this.instruments = {
        decisions: meter.createCounter('ratelimit.decisions', { description: 'Rate limit decisions by policy and outcome' }),
        duration: meter.createHistogram('ratelimit.redis.duration', { description: 'Duration of the Redis call of a decision', unit: 's' }),
      };
    }
    return this.instruments;
  }

  call(result: CallResult, durationMs: number) {
    this.meter?.duration.record(durationMs / 1000, { 'ratelimit.result': result });
  }

  /**
   * Counts a decision of these limits (their names joined are the policy)
   * and hands it to the hook; with neither an SDK nor a hook, nothing is
   * built at all.
   */
  decided(limits: readonly { limit: { name: string } }[], outcome: Outcome, decision: Decision | null, durationMs: number | null, error: unknown) {
    const meter = this.meter;
    if (meter === undefined && this.hook === undefined) return;
    meter?.decisions.add(1, { 'ratelimit.policy': limits.map((l) => l.limit.name).join(','), 'ratelimit.outcome': outcome });
    if (!this.hook) return;
    try {
      this.hook({ outcome, decision, durationMs, error });
    } catch (error) {
      this.log(`rate limiter onDecision hook threw: ${String(error)}`);
    }
  }
}
