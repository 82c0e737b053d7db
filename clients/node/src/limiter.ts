// One call of a redis-ratelimit command, and its reply as a decision.

/** The five algorithms of the module, by their command's name. */
export type Algorithm = 'tokenbucket' | 'leakybucket' | 'fixedwindow' | 'slidingwindow' | 'slidinglog';

/** What to limit and how. */
export interface LimitOptions {
  /** Token bucket by default. */
  algorithm?: Algorithm;
  /** The bucket's capacity, or the window's limit. */
  limit: number;
  /** Buckets: units per second. */
  rate?: number;
  /** Windows: the window in seconds. */
  window?: number;
  /** Units this request takes; 1 by default, 0 only looks. */
  cost?: number;
  /** Unix seconds; the Redis server's clock (`*`) by default. */
  now?: number | '*';
  /** Prefix of the Redis key, `ratelimit:` by default. */
  prefix?: string;
  /** The policy's name in the RateLimit headers, `default` by default. */
  policy?: string;
}

/** The module's reply, named. */
export interface Decision {
  allowed: boolean;
  remaining: number;
  limit: number;
  /** 0 when allowed, -1 when the request can never pass. */
  retryAfterMs: number;
  resetAfterMs: number;
  /** Leaky bucket only: how long to wait before doing the work. */
  delayMs?: number;
  /** The policy the headers advertise: its name, quota and window in seconds. */
  policy: { name: string; quota: number; windowSeconds: number };
}

/** The least a Redis client must do: node-redis's `sendCommand`. */
export interface CommandSender {
  sendCommand(args: string[]): Promise<unknown>;
}

function secondsText(seconds: number): string {
  // Six decimals at most: the module keeps time and rates to the microsecond.
  return String(Number(seconds.toFixed(6)));
}

/** The command and its arguments for `key` under `options`. */
export function commandFor(key: string, options: LimitOptions): string[] {
  const algorithm = options.algorithm ?? 'tokenbucket';
  const second = algorithm.endsWith('bucket') ? options.rate : options.window;
  if (second === undefined || !(second > 0)) {
    throw new Error(`${algorithm} needs a positive ${algorithm.endsWith('bucket') ? 'rate' : 'window'}`);
  }
  const now = options.now === undefined || options.now === '*' ? '*' : secondsText(options.now);
  return [
    `RL.${algorithm.toUpperCase()}`,
    key,
    String(options.limit),
    secondsText(second),
    now,
    String(options.cost ?? 1),
  ];
}

/** The time the whole quota takes to come back: the window, or capacity / rate. */
function policyWindow(options: LimitOptions): number {
  const algorithm = options.algorithm ?? 'tokenbucket';
  const seconds = algorithm.endsWith('bucket') ? options.limit / (options.rate ?? 1) : (options.window ?? 1);
  return Math.max(1, Math.ceil(seconds));
}

/**
 * Asks the limiter whether `clientId` may make this request, taking
 * `options.cost` units when it may.
 */
export async function checkRateLimit(
  clientId: string,
  options: LimitOptions & { redis: CommandSender },
): Promise<Decision> {
  const { redis } = options;
  const key = `${options.prefix ?? 'ratelimit:'}${clientId}`;
  const reply = (await redis.sendCommand(commandFor(key, options))) as number[];
  const [allowed, remaining, limit, retryAfterMs, resetAfterMs, delayMs] = reply.map(Number);
  return {
    allowed: allowed === 1,
    remaining,
    limit,
    retryAfterMs,
    resetAfterMs,
    ...(delayMs === undefined ? {} : { delayMs }),
    policy: { name: options.policy ?? 'default', quota: limit, windowSeconds: policyWindow(options) },
  };
}
