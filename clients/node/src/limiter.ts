// A limiter: its limits checked once, then per request one RL.MULTI over
// all of them (one per partition key on Redis Cluster), all or nothing.

import { byIp, isIpv6Subnet } from './keys.js';
import { MODES, ModeSwitch, type Mode } from './mode.js';
import {
  checkFunction,
  checkLimits,
  checkUnknown,
  costOf,
  sizeOf,
  isBucket,
  RateLimitConfigError,
  type Algorithm,
  type CheckedLimit,
  type Limit,
  type QuotaUnit,
} from './options.js';
import { clientKind, isErrorReply, type ClientKind, type Connection } from './redis.js';

export interface LimiterOptions<Req = any> {
  /** The app's node-redis or ioredis client (single or cluster). The limiter opens its own connection from it. */
  redis: unknown;
  /** One limit, or several checked together. */
  limits: Limit<Req> | Limit<Req>[];
  /** Whom a request counts against, for limits without a key of their own: the client address by default. */
  key?: (req: Req) => string | Promise<string>;
  /** The default key's IPv6 grouping: 56 (a /56), any prefix length 1..128, or false for whole addresses. */
  ipv6Subnet?: number | false;
  /** Prefix of the Redis keys, `ratelimit:` by default. */
  prefix?: string;
  /** Milliseconds to wait for Redis before treating it as unavailable; 1000 by default. */
  timeoutMs?: number;
  /** Redis unavailable: let requests through (true, the default) or refuse them. */
  failOpen?: boolean;
  /** Where the line about an unavailable Redis goes; console.warn by default. */
  log?: (line: string) => void;
  /** `auto` (default): the module where a node has it, else the Lua script; `module`; or `script`. */
  mode?: Mode;
}

/** One limit's part of a decision. */
export interface LimitDecision {
  name: string;
  algorithm: Algorithm;
  /** The Redis key. */
  key: string;
  /** Whether this limit alone admits the request. */
  allowed: boolean;
  remaining: number;
  limit: number;
  /** 0 when allowed, -1 when it never can. */
  retryAfterMs: number;
  resetAfterMs: number;
  /** Leaky bucket: how long the request should wait before running. */
  delayMs?: number;
  cost: number;
  /** rate or window, as configured. */
  param: number;
  quotaUnit: QuotaUnit | undefined;
}

/** What the limiter decided for one request. */
export interface Decision {
  allowed: boolean;
  /** 0 when allowed, -1 when the request can never be admitted, else the wait. */
  retryAfterMs: number;
  neverAllowed: boolean;
  /** The longest leaky-bucket delay among the limits (0 without one). */
  delayMs: number;
  limits: LimitDecision[];
  /** Gives back the units this request took (all of them, or `units` from each limit). */
  refund(units?: number): Promise<void>;
}

/** Redis did not answer in time, or is down. */
export class RateLimiterUnavailable extends Error {
  constructor(readonly cause: unknown) {
    super(`rate limiter unavailable: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'RateLimiterUnavailable';
  }
}

const OPTIONS = ['redis', 'limits', 'key', 'ipv6Subnet', 'prefix', 'timeoutMs', 'failOpen', 'log', 'mode'];

/** A number as the module takes it: at most six decimals. */
function decimal(value: number): string {
  return String(Number(value.toFixed(6)));
}

/**
 * The last part of a limit's Redis key, for a request whose quota is
 * `size`: its name; for an unnamed limit, what it is (algorithm, limit,
 * rate or window, and a quota unit other than requests), so that different
 * unnamed limiters never share state and identical ones do.
 */
function keyName(limit: CheckedLimit, size: number): string {
  if (limit.named) return limit.name;
  const spec = `${limit.algorithm}:${size}:${decimal(limit.param)}`;
  return limit.quotaUnit === undefined || limit.quotaUnit === 'requests' ? spec : `${spec}:${limit.quotaUnit}`;
}

/** One connection of our own, opened on first use and replaced after a timeout. */
class Link {
  private connection: Connection | undefined;

  constructor(private readonly kind: ClientKind, private readonly timeoutMs: number, private readonly modes: ModeSwitch) {}

  /** Sends a module call (as the Lua script where the mode says so); `key` routes it. */
  async send(key: string, args: string[]): Promise<unknown> {
    let connection = this.connection;
    if (!connection) {
      const opened = (connection = this.connection = this.kind.open());
      opened.ready.catch(() => this.drop(opened)); // the next call tries afresh
    }
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        reject(new Error(`no answer from Redis within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
    });
    try {
      const ready = connection;
      return await Promise.race([ready.ready.then(() => this.modes.send(ready, key, args)), timeout]);
    } catch (error) {
      // A command that timed out may still be waiting in Redis: closing the
      // connection drops it there, so it never charges later.
      if (timedOut) this.drop(connection);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  private drop(connection: Connection) {
    if (this.connection === connection) this.connection = undefined;
    connection.close();
  }

  close() {
    if (this.connection) this.drop(this.connection);
  }
}

interface Charge {
  limit: CheckedLimit;
  key: string;
  /** The limit's size for this request. */
  size: number;
  cost: number;
}

export class Limiter<Req = any> {
  readonly limits: CheckedLimit<Req>[];
  readonly failOpen: boolean;
  readonly log: (line: string) => void;
  private readonly link: Link;
  private readonly cluster: boolean;
  private readonly key: (req: Req) => string | Promise<string>;
  private readonly prefix: string;

  constructor(options: LimiterOptions<Req>, shared?: { link: Link; cluster: boolean; base: CheckedLimit<Req>[] }) {
    if (typeof options !== 'object' || options === null) throw new RateLimitConfigError('options', 'must be an object');
    checkUnknown('', options, OPTIONS);
    if (options.limits === undefined) throw new RateLimitConfigError('limits', 'required, e.g. { limit: 60, rate: 1 }');
    const base = shared?.base ?? [];
    this.limits = [...base, ...checkLimits('limits', options.limits, base.map((l) => l.name))];
    checkFunction('key', options.key);
    checkFunction('log', options.log);
    if (options.ipv6Subnet !== undefined && !isIpv6Subnet(options.ipv6Subnet)) {
      throw new RateLimitConfigError('ipv6Subnet', 'must be an integer from 1 to 128, or false');
    }
    const prefix = options.prefix ?? 'ratelimit:';
    if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
      throw new RateLimitConfigError('prefix', 'must be a string without { or } (the key adds its own hash tag)');
    }
    const timeoutMs = options.timeoutMs ?? 1000;
    if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new RateLimitConfigError('timeoutMs', `must be a positive number of milliseconds (got ${String(timeoutMs)})`);
    }
    if (options.failOpen !== undefined && typeof options.failOpen !== 'boolean') {
      throw new RateLimitConfigError('failOpen', 'must be true or false');
    }
    const mode = options.mode ?? 'auto';
    if (!MODES.includes(mode)) throw new RateLimitConfigError('mode', `must be 'auto', 'module' or 'script' (got ${String(mode)})`);
    this.failOpen = options.failOpen ?? true;
    this.log = options.log ?? ((line) => console.warn(line));
    this.key = options.key ?? (byIp(options.ipv6Subnet ?? 56) as (req: Req) => string);
    this.prefix = prefix;
    if (shared) {
      ({ link: this.link, cluster: this.cluster } = shared);
    } else {
      const kind = clientKind(options.redis);
      this.link = new Link(kind, timeoutMs, new ModeSwitch(mode));
      this.cluster = kind.name.endsWith('cluster');
    }
    this.options = options;
  }

  private readonly options: LimiterOptions<Req>;

  /**
   * This limiter's limits and `extra` ones, checked together in one call
   * (a route's limits on top of the app's). Same connection, same options.
   */
  with(extra: Limit<Req> | Limit<Req>[]): Limiter<Req> {
    return new Limiter({ ...this.options, limits: extra }, { link: this.link, cluster: this.cluster, base: this.limits });
  }

  /**
   * Decides for one request, taking its units when admitted. Returns null
   * when Redis is unavailable and the limiter fails open (after one log
   * line); throws RateLimiterUnavailable when it fails closed, and any
   * error Redis answered (a server error, never a pass). Limits named in
   * `already` were charged for this request by a stacked limiter: skipped.
   */
  async check(req: Req, already: ReadonlySet<string> = new Set()): Promise<Decision | null> {
    const charges = (await this.charges(req)).filter((c) => !already.has(c.limit.name));
    try {
      return await this.decide(charges);
    } catch (error) {
      if (isErrorReply(error)) throw error;
      const unavailable = new RateLimiterUnavailable(error);
      this.log(`${unavailable.message} (${this.failOpen ? 'letting the request through' : 'refusing it'})`);
      if (this.failOpen) return null;
      throw unavailable;
    }
  }

  /** Limiters made from one another with with() share it. */
  get family(): object {
    return this.link;
  }

  /** Closes the limiter's own connection. */
  close() {
    this.link.close();
  }

  private async charges(req: Req): Promise<Charge[]> {
    return Promise.all(
      this.limits.map(async (limit) => {
        const partition = await (limit.key ?? this.key)(req);
        if (typeof partition !== 'string') throw new TypeError(`key of limit "${limit.name}" must give a string`);
        const size = await sizeOf(limit, req);
        return { limit, key: `${this.prefix}{${partition}}:${keyName(limit, size)}`, size, cost: await costOf(limit, req) };
      }),
    );
  }

  /** One RL.MULTI, or on a cluster one per hash tag, with refunds when one of them denies. */
  private async decide(charges: Charge[]): Promise<Decision> {
    if (charges.length === 0) return { allowed: true, retryAfterMs: 0, neverAllowed: false, delayMs: 0, limits: [], refund: async () => {} };
    const groups = this.cluster ? groupByTag(charges) : [charges];
    const settled = await Promise.allSettled(groups.map((group) => this.multi(group)));
    const replies = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    const allowed = failure === undefined && replies.every((reply) => reply.allowed);
    if (!allowed && groups.length > 1) {
      // On a cluster some groups may have taken their units while another
      // denied or failed: give them back. A refund that fails is logged; the
      // denial stands.
      const taken = replies.filter((r) => r.allowed).flatMap((r) => r.limits.map((limit, i) => ({ limit, charge: r.charges[i] })));
      const refunds = await Promise.allSettled(taken.map(({ charge }) => this.refundOne(charge, charge.cost)));
      refunds.forEach((refund, i) => {
        if (refund.status === 'rejected') this.log(`rate limiter refund failed: ${String(refund.reason)}`);
        // As RL.MULTI reports a denied call: each limit's state as it stays.
        else if (refund.value) Object.assign(taken[i].limit, stateOf(refund.value));
      });
    }
    if (failure) throw failure.reason;
    const waits = replies.map((r) => r.retryAfterMs);
    const retryAfterMs = allowed ? 0 : waits.includes(-1) ? -1 : Math.max(...waits);
    const limits = replies.flatMap((r) => r.limits);
    const ordered = charges.map((c) => limits.find((l) => l.key === c.key) as LimitDecision);
    return {
      allowed,
      retryAfterMs,
      neverAllowed: retryAfterMs === -1,
      delayMs: allowed ? Math.max(0, ...ordered.map((l) => l.delayMs ?? 0)) : 0,
      limits: ordered,
      refund: async (units?: number) => {
        if (!allowed) return;
        await Promise.all(charges.map((c) => this.refundOne(c, units === undefined ? c.cost : Math.min(units, c.cost))));
      },
    };
  }

  private async multi(charges: Charge[]) {
    const args = ['RL.MULTI', String(charges.length), ...charges.map((c) => c.key), '*'];
    for (const { limit, size, cost } of charges) args.push(limit.algorithm.toUpperCase(), String(size), decimal(limit.param), String(cost));
    const reply = (await this.link.send(charges[0].key, args)) as [number, number, ...number[][]];
    const [allowed, retryAfterMs, ...fields] = reply;
    return {
      charges,
      allowed: Number(allowed) === 1,
      retryAfterMs: Number(retryAfterMs),
      limits: fields.map((f, i): LimitDecision => {
        const [ok, remaining, limit, retry, reset, delay] = f.map(Number);
        const { limit: checked, key, cost } = charges[i];
        return {
          name: checked.name,
          algorithm: checked.algorithm,
          key,
          allowed: ok === 1,
          remaining,
          limit,
          retryAfterMs: retry,
          resetAfterMs: reset,
          ...(delay === undefined ? {} : { delayMs: delay }),
          cost,
          param: checked.param,
          quotaUnit: checked.quotaUnit,
        };
      }),
    };
  }

  /** RL.REFUND: the limit's fields after the refund, or undefined when there was nothing to give back. */
  private async refundOne({ limit, key, size }: Charge, units: number): Promise<number[] | undefined> {
    if (units <= 0) return undefined;
    return (await this.link.send(key, ['RL.REFUND', key, limit.algorithm.toUpperCase(), String(size), decimal(limit.param), '*', String(units)])) as number[];
  }
}

/** A limit's state from the fields of a reply (remaining, reset, delay). */
function stateOf(fields: number[]): Pick<LimitDecision, 'remaining' | 'resetAfterMs'> & { delayMs?: number } {
  const [, remaining, , , reset, delay] = fields.map(Number);
  return { remaining, resetAfterMs: reset, ...(delay === undefined ? {} : { delayMs: delay }) };
}

/** Charges grouped by their key's hash tag, so each group shares a cluster slot. */
function groupByTag(charges: Charge[]): Charge[][] {
  const groups = new Map<string, Charge[]>();
  for (const charge of charges) {
    const start = charge.key.indexOf('{');
    const tag = charge.key.slice(start + 1, charge.key.indexOf('}', start + 1));
    groups.set(tag, [...(groups.get(tag) ?? []), charge]);
  }
  return [...groups.values()];
}

/** The time the whole quota takes to come back, in whole seconds: the window, or limit / rate. */
export function windowSeconds(limit: { algorithm: Algorithm; limit: number; param: number }): number {
  return Math.max(1, Math.ceil(isBucket(limit.algorithm) ? limit.limit / limit.param : limit.param));
}

/** A limiter over `options.limits`: `check(req)` decides for one request. */
export function createLimiter<Req = any>(options: LimiterOptions<Req>): Limiter<Req> {
  return new Limiter(options);
}
