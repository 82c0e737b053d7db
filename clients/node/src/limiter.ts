// A limiter: its limits checked once, then per request one RL.MULTI over
// all of them (one per partition key on Redis Cluster), all or nothing.

import { Deadlines } from './deadlines.js';
import { DenialCache } from './denials.js';
import { LocalLimiter, micros, type MultiReply } from './local.js';
import { Metrics, type DecisionEvent } from './metrics.js';
import { byIp, isIpv6Subnet } from './keys.js';
import { MODES, ModeSwitch, type Mode } from './mode.js';
import {
  checkFunction,
  checkInteger,
  checkLimits,
  checkUnknown,
  costOf,
  sizeOf,
  isBucket,
  isPromise,
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
  /**
   * Redis unavailable: `open` (the default) lets requests through, `closed`
   * refuses them (503), `local` limits them in process (each limit divided
   * by `instances`) until Redis answers again.
   */
  onUnavailable?: OnUnavailable;
  /** With onUnavailable `local`: how many processes share the limits; each limits to limit / instances (rounded down, at least 1). 1 by default. */
  instances?: number;
  /** The older form of onUnavailable: true is `open`, false `closed`. */
  failOpen?: boolean;
  /** Where the line about an unavailable Redis goes; console.warn by default. */
  log?: (line: string) => void;
  /** `auto` (default): the module where a node has it, else the Lua script; `module`; or `script`. */
  mode?: Mode;
  /** Called with each decision's outcome (and the Redis call's duration); an exception in it is logged, never breaks the request. */
  onDecision?: (event: DecisionEvent) => void;
  /** Denials answered in process until their retry time: the most kept (least recently used out), 10000 by default; 0 turns it off. */
  denialCache?: number;
}

export type OnUnavailable = 'open' | 'closed' | 'local';

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
  /** Concurrency: the lease holding this request's slots, for release(); 0 when none was taken. */
  leaseId?: number;
  cost: number;
  /** rate, window or lease, as configured. */
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
  /**
   * Gives back units this request took: every limit's whole cost with no
   * argument, or `{ name: units }` to the limits named only (at most the
   * cost each took). Concurrency limits are not refunded: release() frees them.
   */
  refund(units?: Record<string, number>): Promise<void>;
  /**
   * Frees the slots of every lease this decision took (RL.RELEASE), once:
   * later calls do nothing. Never rejects: a failure is logged, and the
   * lease runs out by itself.
   */
  release(): Promise<void>;
  /**
   * Makes every lease this decision holds run `lease` seconds from now
   * (RL.RENEW), for work that outlasts it. True when each was still held;
   * false when one had run out or been released, or the decision holds
   * none. Rejects when Redis cannot answer, so the work can stop.
   */
  renew(): Promise<boolean>;
}

/** Redis gave no answer within timeoutMs. */
class RedisTimeout extends Error {}

/** Redis did not answer in time, or is down. */
export class RateLimiterUnavailable extends Error {
  constructor(readonly cause: unknown) {
    super(`rate limiter unavailable: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'RateLimiterUnavailable';
  }
}

const OPTIONS = ['redis', 'limits', 'key', 'ipv6Subnet', 'prefix', 'timeoutMs', 'onUnavailable', 'failOpen', 'instances', 'log', 'mode', 'denialCache', 'onDecision'];

/** Why a call was not made: Redis failed, and waits for its next try. */
const NOT_TRIED = 'Redis did not answer the last call; tried again at most once a second';

/** After a failure, how long requests are answered by onUnavailable before Redis is tried again. */
const RETRY_MS = 1000;

/** A number as the module takes it: at most six decimals. */
function decimal(value: number): string {
  return String(Number(value.toFixed(6)));
}

const specWords = new WeakMap<CheckedLimit, { command: string; param: string }>();

/** A limit's algorithm and parameter as the module takes them, worked out once per limit. */
function wordsOf(limit: CheckedLimit): { command: string; param: string } {
  let words = specWords.get(limit);
  if (words === undefined) specWords.set(limit, (words = { command: limit.algorithm.toUpperCase(), param: decimal(limit.param) }));
  return words;
}

/** An unnamed limit's key name at the size it was last used at (a size may be a function of the request). */
const unnamedKeys = new WeakMap<CheckedLimit, { size: number; name: string }>();

/**
 * The last part of a limit's Redis key, for a request whose quota is
 * `size`: its name; for an unnamed limit, what it is (algorithm, limit,
 * rate or window, and a quota unit other than requests), so that different
 * unnamed limiters never share state and identical ones do.
 */
function keyName(limit: CheckedLimit, size: number): string {
  if (limit.named) return limit.name;
  const known = unnamedKeys.get(limit);
  if (known !== undefined && known.size === size) return known.name;
  const spec = `${limit.algorithm}:${size}:${wordsOf(limit).param}`;
  // A concurrency limit's unit (concurrent-requests) is the only one it has: not repeated.
  const ownUnit = limit.quotaUnit === undefined || limit.quotaUnit === 'requests' || limit.algorithm === 'concurrency';
  const name = ownUnit ? spec : `${spec}:${limit.quotaUnit}`;
  unnamedKeys.set(limit, { size, name });
  return name;
}

/**
 * One connection of our own, opened on first use and replaced after a
 * failure. After a failure Redis is tried again at most once a second,
 * one call at a time (a probe); until one answers, requests get the
 * onUnavailable policy without a call.
 */
class Link {
  private connection: Connection | undefined;
  /** performance.now() from which a probe may go; 0 while Redis answers. */
  private retryAt = 0;
  private probing = false;

  /** Whether Redis failed and waits for its next try. */
  get down(): boolean {
    return this.retryAt !== 0;
  }

  /** Whether a request may call Redis now (taking the probe when one is due). */
  mayCall(): boolean {
    if (!this.down) return true;
    if (this.probing || performance.now() < this.retryAt) return false;
    this.probing = true;
    return true;
  }

  /** Redis answered (a reply or an error reply). */
  answered() {
    this.retryAt = 0;
    this.probing = false;
  }

  /** Redis could not answer: a fresh connection for the probe due in a second. */
  failed() {
    this.retryAt = performance.now() + RETRY_MS;
    this.probing = false;
    this.close();
  }

  /** The connection once it can take commands. */
  private ready: Connection | undefined;
  private readonly deadlines: Deadlines;

  constructor(private readonly kind: ClientKind, private readonly timeoutMs: number, private readonly modes: ModeSwitch) {
    this.deadlines = new Deadlines(timeoutMs);
  }

  /** Sends a module call (as the Lua script where the mode says so); `key` routes it. */
  send(key: string, args: string[]): Promise<unknown> {
    let connection = this.connection;
    if (!connection) {
      const opened = (connection = this.connection = this.kind.open());
      opened.ready.then(
        () => (this.ready = opened),
        () => this.drop(opened), // the next call tries afresh
      );
    }
    const sending = connection;
    let work: Promise<unknown>;
    try {
      work = sending === this.ready ? this.modes.send(sending, key, args) : sending.ready.then(() => this.modes.send(sending, key, args));
    } catch (error) {
      work = Promise.reject(error);
    }
    return this.deadlines.within(work, () => {
      // A command that timed out may still be waiting in Redis: closing the
      // connection drops it there, so it never charges later.
      this.drop(sending);
      return new RedisTimeout(`no answer from Redis within ${this.timeoutMs} ms`);
    });
  }

  private drop(connection: Connection) {
    if (this.connection === connection) this.connection = undefined;
    if (this.ready === connection) this.ready = undefined;
    connection.close();
  }

  close() {
    if (this.connection) this.drop(this.connection);
  }
}

/** What limiters made from one another with with() share. */
interface Shared<Req> {
  link: Link;
  cluster: boolean;
  local: LocalLimiter | undefined;
  base: CheckedLimit<Req>[];
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
  readonly onUnavailable: OnUnavailable;
  readonly instances: number;
  readonly log: (line: string) => void;
  private readonly link: Link;
  private readonly cluster: boolean;
  private readonly key: (req: Req) => string | Promise<string>;
  private readonly prefix: string;
  private readonly denials: DenialCache;
  private readonly metrics: Metrics;
  /** onUnavailable `local`: the limits in process while Redis is unavailable. */
  private readonly local: LocalLimiter | undefined;

  constructor(options: LimiterOptions<Req>, shared?: Shared<Req>) {
    if (typeof options !== 'object' || options === null) throw new RateLimitConfigError('options', 'must be an object');
    checkUnknown('', options, OPTIONS);
    if (options.limits === undefined) throw new RateLimitConfigError('limits', 'required, e.g. { limit: 60, rate: 1 }');
    const base = shared?.base ?? [];
    this.limits = [...base, ...checkLimits('limits', options.limits, base.map((l) => l.name))];
    checkFunction('key', options.key);
    checkFunction('log', options.log);
    checkFunction('onDecision', options.onDecision);
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
    if (options.onUnavailable !== undefined && !['open', 'closed', 'local'].includes(options.onUnavailable)) {
      throw new RateLimitConfigError('onUnavailable', `must be 'open', 'closed' or 'local' (got ${String(options.onUnavailable)})`);
    }
    if (options.onUnavailable !== undefined && options.failOpen !== undefined) {
      throw new RateLimitConfigError('failOpen', 'give onUnavailable or failOpen (its older form), not both');
    }
    const mode = options.mode ?? 'auto';
    if (!MODES.includes(mode)) throw new RateLimitConfigError('mode', `must be 'auto', 'module' or 'script' (got ${String(mode)})`);
    this.denials = new DenialCache(checkInteger('denialCache', options.denialCache ?? 10_000, 0));
    this.onUnavailable = options.onUnavailable ?? (options.failOpen === false ? 'closed' : 'open');
    this.failOpen = this.onUnavailable === 'open';
    this.instances = checkInteger('instances', options.instances ?? 1, 1);
    this.log = options.log ?? ((line) => console.warn(line));
    this.metrics = new Metrics(options.onDecision, this.log);
    this.key = options.key ?? (byIp(options.ipv6Subnet ?? 56) as (req: Req) => string);
    this.prefix = prefix;
    if (shared) {
      ({ link: this.link, cluster: this.cluster, local: this.local } = shared);
    } else {
      const kind = clientKind(options.redis);
      this.link = new Link(kind, timeoutMs, new ModeSwitch(mode));
      this.cluster = kind.name.endsWith('cluster');
      this.local = this.onUnavailable === 'local' ? new LocalLimiter() : undefined;
    }
    this.options = options;
  }

  private readonly options: LimiterOptions<Req>;

  /**
   * This limiter's limits and `extra` ones, checked together in one call
   * (a route's limits on top of the app's). Same connection, same options.
   */
  with(extra: Limit<Req> | Limit<Req>[]): Limiter<Req> {
    return new Limiter({ ...this.options, limits: extra }, { link: this.link, cluster: this.cluster, local: this.local, base: this.limits });
  }

  /**
   * Decides for one request, taking its units when admitted. When Redis is
   * unavailable (one log line per failed call): null with onUnavailable
   * `open`, the in-process decision with `local`, RateLimiterUnavailable
   * thrown with `closed`. Throws any error Redis answered (a server error,
   * never a pass). Limits named in `already` were charged for this request
   * by a stacked limiter: skipped.
   */
  check(req: Req, already?: ReadonlySet<string>): Promise<Decision | null> {
    // No async frames on the way: each was a promise and a resumption per request.
    try {
      const charges = this.charges(req);
      if (isPromise(charges)) return charges.then((all) => this.checkCharges(all, already));
      return this.checkCharges(charges, already);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** check() once each limit's key, size and cost are known. Throws what check() rejects with. */
  private checkCharges(all: Charge[], already: ReadonlySet<string> | undefined): Promise<Decision | null> {
    const charges = already !== undefined && already.size > 0 ? all.filter((c) => !already.has(c.limit.name)) : all;
    if (charges.length === 0) return Promise.resolve(this.admittedWithoutLimits());
    // A release frees a slot long before a concurrency denial's retry time: never cached.
    const cacheable = this.denials.enabled && !charges.some((c) => c.limit.algorithm === 'concurrency');
    let cacheKey: string | undefined; // made once, when the cache is asked or told
    if (cacheable && this.denials.holdsAny) {
      const known = this.denials.answer((cacheKey = keyOf(charges)), charges);
      if (known) {
        this.metrics.decided(charges, 'denied_in_process', known, null, null);
        return Promise.resolve(known);
      }
    }
    if (!this.link.mayCall()) return Promise.resolve(this.unavailable(charges, undefined, null));
    const started = performance.now();
    return this.decide(charges).then(
      (decision) => {
        const durationMs = performance.now() - started;
        this.metrics.call('ok', durationMs);
        this.link.answered();
        if (cacheable && !decision.allowed) this.denials.remember(cacheKey ?? keyOf(charges), charges, decision);
        this.metrics.decided(charges, decision.allowed ? 'allowed' : 'denied', decision, durationMs, null);
        return decision;
      },
      (error) => {
        const durationMs = performance.now() - started;
        this.metrics.call(error instanceof RedisTimeout ? 'timeout' : 'error', durationMs);
        if (isErrorReply(error)) {
          this.link.answered();
          throw error;
        }
        this.link.failed();
        return this.unavailable(charges, error, durationMs);
      },
    );
  }

  /**
   * The onUnavailable answer: null (open), the in-process decision (local)
   * or RateLimiterUnavailable (closed). A failed call writes one log line;
   * requests answered while Redis waits for its next try do not (`error`
   * undefined).
   */
  private unavailable(charges: Charge[], error: unknown, durationMs: number | null): Decision | null {
    const unavailable = new RateLimiterUnavailable(error ?? new Error(NOT_TRIED));
    const handling = { open: 'letting the request through', closed: 'refusing it', local: 'limiting in process' }[this.onUnavailable];
    if (error !== undefined) this.log(`${unavailable.message} (${handling}; Redis is tried again in a second)`);
    if (this.local) {
      const decision = this.decideLocally(this.local, charges);
      this.metrics.decided(charges, decision.allowed ? 'unavailable_local_allowed' : 'unavailable_local_denied', decision, durationMs, unavailable.cause);
      return decision;
    }
    this.metrics.decided(charges, this.failOpen ? 'unavailable_open' : 'unavailable_closed', null, durationMs, unavailable.cause);
    if (this.failOpen) return null;
    throw unavailable;
  }

  /**
   * The decision of the in-process limiter (local.ts), each limit divided
   * among `instances`. Its units are not given back by refund(): they were
   * never taken in Redis, and the local state is only a stand-in. Its
   * leases are released in process, even once Redis is back.
   */
  private decideLocally(local: LocalLimiter, charges: Charge[]): Decision {
    const nowUs = () => BigInt(Date.now()) * 1000n;
    const shares = charges.map((c) => ({ ...c, size: Math.max(1, Math.floor(c.size / this.instances)) }));
    const specs = shares.map(({ limit, size, cost }) => ({ algorithm: limit.algorithm, size, param: wordsOf(limit).param, n: cost }));
    const { allowed, retryAfterMs, limits } = multiResult(shares, local.multi(shares.map((c) => c.key), nowUs(), specs));
    return decisionOf(
      allowed,
      retryAfterMs,
      limits,
      async (units) => void unitsBack(charges, units),
      async () => {
        for (const l of limits) if (l.leaseId) local.release(l.key, l.leaseId, nowUs());
      },
      async () => allRenewed(charges, limits, (charge, leaseId) => local.renew(charge.key, leaseId, micros(wordsOf(charge.limit).param), nowUs())),
    );
  }

  /** Limiters made from one another with with() share it. */
  get family(): object {
    return this.link;
  }

  /** Closes the limiter's own connection. */
  close() {
    this.link.close();
  }

  /** Each limit's key, size and cost for this request; a promise only when a function of a limit is async. */
  private charges(req: Req): Charge[] | Promise<Charge[]> {
    const parts = this.limits.map((limit) => [limit, (limit.key ?? this.key)(req), sizeOf(limit, req), costOf(limit, req)] as const);
    if (parts.some(([, partition, size, cost]) => isPromise(partition) || isPromise(size) || isPromise(cost))) {
      return Promise.all(parts.map(async ([limit, partition, size, cost]) => this.charge(limit, await partition, await size, await cost)));
    }
    return parts.map(([limit, partition, size, cost]) => this.charge(limit, partition as string, size as number, cost as number));
  }

  private charge(limit: CheckedLimit<Req>, partition: string, size: number, cost: number): Charge {
    if (typeof partition !== 'string') throw new TypeError(`key of limit "${limit.name}" must give a string`);
    return { limit, key: `${this.prefix}{${partition}}:${keyName(limit, size)}`, size, cost };
  }

  /** One RL.MULTI, or on a cluster one per hash tag, with refunds when one of them denies. */
  private decide(charges: Charge[]): Promise<Decision> {
    const groups = this.cluster ? groupByTag(charges) : [charges];
    // One group (no cluster, or one hash tag): its reply is the decision's, its failure too.
    if (groups.length === 1) {
      return this.link.send(charges[0].key, multiArgs(charges)).then((reply) => this.decisionFrom(charges, multiResult(charges, reply as MultiReply)));
    }
    return this.acrossSlots(charges, groups).then((result) => this.decisionFrom(charges, result));
  }

  /** The decision of an RL.MULTI reply (or replies): refund and release go back to Redis. */
  private decisionFrom(charges: Charge[], { allowed, retryAfterMs, limits }: { allowed: boolean; retryAfterMs: number; limits: LimitDecision[] }): Decision {
    return decisionOf(
      allowed,
      retryAfterMs,
      limits,
      async (units?: Record<string, number>) => {
        const back = unitsBack(charges, units);
        if (!allowed) return;
        await Promise.all(back.map(([charge, n]) => this.refundOne(charge, n)));
      },
      () => this.releaseAll(limits),
      () => this.renewAll(charges, limits),
    );
  }

  /** A request none of whose limits is left to check (a stacked limiter charged them all). */
  private admittedWithoutLimits(): Decision {
    return decisionOf(true, 0, [], async (units) => void unitsBack([], units), async () => {}, async () => false);
  }

  /**
   * One RL.MULTI per hash tag (a cluster). When one denies or fails, the
   * others that took their units give them back (refunds; leases
   * released); one that fails is logged, and the denial stands.
   */
  private async acrossSlots(charges: Charge[], groups: Charge[][]) {
    const settled = await Promise.allSettled(groups.map((group) => this.multi(group)));
    const replies = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    const allowed = failure === undefined && replies.every((reply) => reply.allowed);
    if (!allowed) {
      const taken = replies.filter((r) => r.allowed).flatMap((r) => r.limits.map((limit, i) => ({ limit, charge: r.charges[i] })));
      const refunds = await Promise.allSettled(taken.map(({ limit, charge }) => this.giveBack(charge, limit)));
      refunds.forEach((refund, i) => {
        if (refund.status === 'rejected') this.log(`rate limiter refund failed: ${String(refund.reason)}`);
        // As RL.MULTI reports a denied call: each limit's state as it stays.
        else if (refund.value) Object.assign(taken[i].limit, refund.value);
      });
    }
    if (failure) throw failure.reason;
    const waits = replies.map((r) => r.retryAfterMs);
    const limits = replies.flatMap((r) => r.limits);
    return {
      allowed,
      retryAfterMs: allowed ? 0 : waits.includes(-1) ? -1 : Math.max(...waits),
      limits: charges.map((c) => limits.find((l) => l.key === c.key) as LimitDecision),
    };
  }

  private multi(charges: Charge[]) {
    return this.link.send(charges[0].key, multiArgs(charges)).then((reply) => multiResult(charges, reply as MultiReply));
  }

  /** What a limit took, given back: a refund, or a lease released. Its state after that, or undefined when nothing was taken. */
  private async giveBack(charge: Charge, taken: LimitDecision): Promise<Partial<LimitDecision> | undefined> {
    if (charge.limit.algorithm !== 'concurrency') {
      const fields = await this.refundOne(charge, charge.cost);
      return fields && stateOf(charge.limit.algorithm, fields);
    }
    if (!taken.leaseId) return undefined;
    const [, held, reset] = await this.releaseOne(charge.key, taken.leaseId);
    return { remaining: Math.max(0, charge.size - held), resetAfterMs: reset, leaseId: 0 };
  }

  /** RL.RELEASE: [released, held, reset_after_ms]. */
  private async releaseOne(key: string, leaseId: number): Promise<number[]> {
    return ((await this.link.send(key, ['RL.RELEASE', key, String(leaseId), '*'])) as unknown[]).map(Number);
  }

  /**
   * RL.RENEW of each lease; Redis unable to answer is RateLimiterUnavailable
   * (at once while Redis waits for its next try), an error reply as it came.
   */
  private renewAll(charges: Charge[], limits: LimitDecision[]): Promise<boolean> {
    if (this.link.down) return Promise.reject(new RateLimiterUnavailable(new Error(NOT_TRIED)));
    return allRenewed(charges, limits, (charge, leaseId) => this.renewOne(charge, leaseId)).catch((error) => {
      if (isErrorReply(error)) throw error;
      this.link.failed();
      throw new RateLimiterUnavailable(error);
    });
  }

  /** RL.RENEW: [renewed, held, reset_after_ms]. */
  private async renewOne({ limit, key }: Charge, leaseId: number): Promise<number[]> {
    return ((await this.link.send(key, ['RL.RENEW', key, String(leaseId), wordsOf(limit).param, '*'])) as unknown[]).map(Number);
  }

  /** Releases every lease of a decision, each on its key's node; a failure is logged, never thrown. */
  private async releaseAll(limits: LimitDecision[]): Promise<void> {
    await Promise.all(
      limits
        .filter((l) => l.leaseId)
        .map((l) => this.releaseOne(l.key, l.leaseId!).catch((error) => this.log(`rate limiter release failed: ${String(error)}`))),
    );
  }

  /** RL.REFUND: the limit's fields after the refund, or undefined when there was nothing to give back. */
  private async refundOne({ limit, key, size }: Charge, units: number): Promise<number[] | undefined> {
    if (units <= 0) return undefined;
    return (await this.link.send(key, ['RL.REFUND', key, wordsOf(limit).command, String(size), wordsOf(limit).param, '*', String(units)])) as number[];
  }
}

function longestDelay(limits: LimitDecision[]): number {
  let longest = 0;
  for (const l of limits) if (l.delayMs !== undefined && l.delayMs > longest) longest = l.delayMs;
  return longest;
}

/**
 * A decision of these limits; `refund` and `release` give units and leases
 * back where they were taken (Redis, or in process). Release runs once.
 */
function decisionOf(
  allowed: boolean,
  retryAfterMs: number,
  limits: LimitDecision[],
  refund: Decision['refund'],
  release: () => Promise<void>,
  renew: () => Promise<boolean>,
): Decision {
  let released: Promise<void> | undefined;
  return {
    allowed,
    retryAfterMs,
    neverAllowed: retryAfterMs === -1,
    delayMs: allowed ? longestDelay(limits) : 0,
    limits,
    refund,
    release: () => (released ??= release()),
    renew,
  };
}

/** Renews each lease of `limits` (in `charges`' order) by `renewOne`: whether every one was held, false with none. */
async function allRenewed(
  charges: Charge[],
  limits: LimitDecision[],
  renewOne: (charge: Charge, leaseId: number) => number[] | Promise<number[]>,
): Promise<boolean> {
  const leased = limits.flatMap((l, i) => (l.leaseId ? [[charges[i], l.leaseId] as const] : []));
  if (leased.length === 0) return false;
  const replies = await Promise.all(leased.map(([charge, leaseId]) => renewOne(charge, leaseId)));
  return replies.every(([renewed]) => renewed === 1);
}

/** The RL.MULTI call for `charges`. */
function multiArgs(charges: Charge[]): string[] {
  const args = ['RL.MULTI', String(charges.length)];
  for (const c of charges) args.push(c.key);
  args.push('*');
  for (const { limit, size, cost } of charges) {
    const { command, param } = wordsOf(limit);
    args.push(command, String(size), param, String(cost));
  }
  return args;
}

/** An RL.MULTI reply (from Redis or the local limiter) for `charges`, as the decision's parts. */
function multiResult(charges: Charge[], reply: MultiReply) {
  const limits: LimitDecision[] = [];
  for (let i = 0; i < charges.length; i++) {
    const f = reply[i + 2] as number[];
    const { limit: checked, key, cost } = charges[i];
    const limit: LimitDecision = {
      name: checked.name,
      algorithm: checked.algorithm,
      key,
      allowed: Number(f[0]) === 1,
      remaining: Number(f[1]),
      limit: Number(f[2]),
      retryAfterMs: Number(f[3]),
      resetAfterMs: Number(f[4]),
      cost,
      param: checked.param,
      quotaUnit: checked.quotaUnit,
    };
    if (f.length > 5) Object.assign(limit, sixthField(checked.algorithm, Number(f[5])));
    limits.push(limit);
  }
  return { charges, allowed: Number(reply[0]) === 1, retryAfterMs: Number(reply[1]), limits };
}

/**
 * What refund(units) gives back, per charge: every cost without `units`,
 * else the named limits' units (at most their cost). A bare number was the
 * old form, which gave it to every limit: refused, as is an unknown name.
 */
function unitsBack(charges: Charge[], units: Record<string, number> | undefined): [Charge, number][] {
  if (units === undefined) return charges.filter((c) => c.limit.algorithm !== 'concurrency').map((c) => [c, c.cost]);
  if (typeof units !== 'object' || units === null || Array.isArray(units)) {
    throw new TypeError(`refund() takes units per limit name, e.g. refund({ ${JSON.stringify(charges[0]?.limit.name ?? 'tokens')}: 3 }), or nothing for every limit's cost (got ${String(units)})`);
  }
  return Object.entries(units).map(([name, n]) => {
    const charge = charges.find((c) => c.limit.name === name);
    if (!charge) throw new TypeError(`refund(): no limit named ${JSON.stringify(name)} in this decision (it has ${charges.map((c) => JSON.stringify(c.limit.name)).join(', ')})`);
    if (charge.limit.algorithm === 'concurrency') throw new TypeError(`refund(): ${JSON.stringify(name)} is a concurrency limit: its slots come back with release(), not a refund`);
    checkInteger(`refund(): ${name}`, n, 0);
    return [charge, Math.min(n, charge.cost)];
  });
}

/** A reply's sixth field, by algorithm: the leaky bucket's delay, a concurrency limit's lease id. */
function sixthField(algorithm: Algorithm, sixth: number | undefined): Pick<LimitDecision, 'delayMs' | 'leaseId'> {
  if (sixth === undefined) return {};
  return algorithm === 'concurrency' ? { leaseId: sixth } : { delayMs: sixth };
}

/** A limit's state from the fields of a reply (remaining, reset, delay). */
function stateOf(algorithm: Algorithm, fields: number[]): Partial<LimitDecision> {
  const [, remaining, , , reset, sixth] = fields.map(Number);
  return { remaining, resetAfterMs: reset, ...sixthField(algorithm, sixth) };
}

/**
 * What a denial is remembered by: the Redis keys and the limits' sizes for
 * the request (each cache belongs to one limiter, whose limits are fixed).
 */
function keyOf(charges: Charge[]): string {
  let key = '';
  for (const c of charges) key += `${c.key}\n${c.size}\n`;
  return key;
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
