// A limiter: its limits checked once, then per request one call over all of
// them (one per partition key on Redis Cluster), all or nothing: RL.MULTI,
// or a single limit's own command.

import { checkArgs, checkReply, groupByTag, keyName, longestWait, multiResult, refundArgs, releaseArgs, renewArgs, stateOf, wordsOf, type MultiResult } from './commands.js';
import { allRenewed, decisionOf, RateLimiterUnavailable, unitsBack, type Charge, type Decision, type LimitDecision } from './decision.js';
import { DenialCache, keyOf } from './denials.js';
import { byIp } from './keys.js';
import { Link, NOT_TRIED, RedisTimeout } from './link.js';
import { LocalLimiter, micros, share, type MultiReply } from './local.js';
import { Metrics, type DecisionEvent } from './metrics.js';
import { ModeSwitch } from './mode.js';
import { checkLimiterOptions, costOf, isPromise, sizeOf, type CheckedLimit, type Limit, type Mode, type OnUnavailable, type ScriptCall } from './options.js';
import { clientKind, isErrorReply } from './redis.js';

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
   * Redis unavailable, for each limit that sets none of its own: `open`
   * (the default) lets requests through, `closed` refuses them (503),
   * `local` limits them in process (each limit divided by `instances`)
   * until Redis answers again. A concurrency limit is `local` unless set.
   */
  onUnavailable?: OnUnavailable;
  /** For `local` limits: how many processes share the limits; each takes limit / instances (rounded down, at least 1), and a bucket rate / instances. 1 by default. */
  instances?: number;
  /** The older form of onUnavailable: true is `open`, false `closed`. */
  failOpen?: boolean;
  /** Where the line about an unavailable Redis goes; console.warn by default. */
  log?: (line: string) => void;
  /** `auto` (default): the module where a node has it, else the Lua library; `module`; or `script`. */
  mode?: Mode;
  /** Script mode: `auto` (default) calls the library as a Redis Function (FCALL) where a node allows it, else EVALSHA; `fcall` Functions only (a refusal is an error); `evalsha` never Functions. */
  scriptCall?: ScriptCall;
  /** Called with each decision's outcome (and the Redis call's duration); an exception in it is logged, never breaks the request. */
  onDecision?: (event: DecisionEvent) => void;
  /** Denials answered in process until their retry time: the most kept (least recently used out), 10000 by default; 0 turns it off. */
  denialCache?: number;
}

/** What limiters made from one another with with() share. */
interface Shared<Req> {
  link: Link;
  cluster: boolean;
  local: LocalLimiter;
  base: CheckedLimit<Req>[];
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
  /** The `local` limits in process while Redis is unavailable (a concurrency limit's by default). */
  private readonly local: LocalLimiter;

  constructor(options: LimiterOptions<Req>, shared?: Shared<Req>) {
    const settings = checkLimiterOptions(options, shared?.base ?? []);
    this.limits = settings.limits;
    this.denials = new DenialCache(settings.denialCache);
    this.onUnavailable = settings.onUnavailable;
    this.failOpen = this.onUnavailable === 'open';
    this.instances = settings.instances;
    this.log = options.log ?? ((line) => console.warn(line));
    this.metrics = new Metrics(options.onDecision, this.log);
    this.key = options.key ?? (byIp(settings.ipv6Subnet) as (req: Req) => string);
    this.prefix = settings.prefix;
    if (shared) {
      ({ link: this.link, cluster: this.cluster, local: this.local } = shared);
    } else {
      const kind = clientKind(options.redis);
      this.link = new Link(kind, settings.timeoutMs, new ModeSwitch(settings.mode, settings.scriptCall, this.log), this.log);
      this.cluster = kind.name.endsWith('cluster');
      this.local = new LocalLimiter(); // empty until Redis fails: a Map
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
   * unavailable (one log line per failed call), by the limits' onUnavailable,
   * the strictest winning: RateLimiterUnavailable thrown when one is
   * `closed`, else the in-process decision over the `local` ones, else
   * null. Throws any error Redis answered (a server error,
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
        this.link.failed(error);
        return this.unavailable(charges, error, durationMs);
      },
    );
  }

  /**
   * The onUnavailable answer, the strictest of the limits' policies: 503
   * (RateLimiterUnavailable) when one is `closed`; else, when one is
   * `local`, the in-process decision over the `local` limits (the `open`
   * ones pass unchecked); else null, a pass. A failed call writes one log
   * line; requests answered while Redis waits for its next try do not
   * (`error` undefined).
   */
  private unavailable(charges: Charge[], error: unknown, durationMs: number | null): Decision | null {
    const unavailable = new RateLimiterUnavailable(error ?? new Error(NOT_TRIED));
    const policy = strictest(charges);
    const handling = { open: 'letting the request through', closed: 'refusing it', local: 'limiting in process' }[policy];
    if (error !== undefined) this.log(`${unavailable.message} (${handling}; Redis is tried again in a second)`);
    if (policy === 'local') {
      const decision = this.decideLocally(charges);
      this.metrics.decided(charges, decision.allowed ? 'unavailable_local_allowed' : 'unavailable_local_denied', decision, durationMs, unavailable.cause);
      return decision;
    }
    this.metrics.decided(charges, policy === 'open' ? 'unavailable_open' : 'unavailable_closed', null, durationMs, unavailable.cause);
    if (policy === 'open') return null;
    throw unavailable;
  }

  /**
   * The decision of the in-process limiter (local.ts) over the `local`
   * limits, each its share among `instances` (limit and rate divided). Its
   * units are not given back by refund(): they were never taken in Redis,
   * and the local state is only a stand-in. Its leases are released in
   * process, even once Redis is back.
   */
  private decideLocally(charges: Charge[]): Decision {
    const local = this.local;
    const nowUs = () => BigInt(Date.now()) * 1000n;
    const ours = charges.filter((c) => c.limit.onUnavailable === 'local');
    const specs = ours.map(({ limit, size, cost }) => share({ algorithm: limit.algorithm, size, param: wordsOf(limit).param, n: cost }, this.instances));
    const shares = ours.map((c, i) => ({ ...c, size: specs[i].size }));
    const { allowed, retryAfterMs, limits } = multiResult(shares, local.multi(shares.map((c) => c.key), nowUs(), specs));
    limits.forEach((l, i) => (l.param = Number(specs[i].param))); // a bucket's rate, divided
    return decisionOf(
      allowed,
      retryAfterMs,
      limits,
      async (units) => void unitsBack(charges, units),
      async () => {
        for (const l of limits) if (l.leaseId) local.release(l.key, l.leaseId, nowUs());
      },
      async () => allRenewed(shares, limits, (charge, leaseId) => local.renew(charge.key, leaseId, micros(wordsOf(charge.limit).param), nowUs())),
    );
  }

  /** Limiters made from one another with with() share it. */
  get family(): object {
    return this.link;
  }

  /** Closes the limiter's own connections for good; checks after it get onUnavailable. */
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

  /** One call (take()), or on a cluster one per hash tag, with refunds when one of them denies. */
  private decide(charges: Charge[]): Promise<Decision> {
    const groups = this.cluster ? groupByTag(charges) : [charges];
    // One group (no cluster, or one hash tag): its reply is the decision's, its failure too.
    if (groups.length === 1) return this.take(charges).then((result) => this.decisionFrom(charges, result));
    return this.acrossSlots(charges, groups).then((result) => this.decisionFrom(charges, result));
  }

  /** The decision of an RL.MULTI reply (or replies): refund and release go back to Redis. */
  private decisionFrom(charges: Charge[], { allowed, retryAfterMs, limits }: Omit<MultiResult, 'charges'>): Decision {
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
   * One call per hash tag (a cluster). When one denies or fails, the
   * others that took their units give them back (refunds; leases
   * released); one that fails is logged, and the denial stands.
   */
  private async acrossSlots(charges: Charge[], groups: Charge[][]) {
    const settled = await Promise.allSettled(groups.map((group) => this.take(group)));
    const replies = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    // A timeout first: the late reply of that slot is still read and undone.
    const failures = settled.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
    const failure = failures.find((f) => f.reason instanceof RedisTimeout) ?? failures[0];
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
    const limits = replies.flatMap((r) => r.limits);
    return {
      allowed,
      retryAfterMs: allowed ? 0 : longestWait(limits),
      limits: charges.map((c) => limits.find((l) => l.key === c.key) as LimitDecision),
    };
  }

  /** One call that takes the charges (RL.MULTI, or one limit's own command), read back as RL.MULTI's reply. When it times out and its reply comes later, what it took is given back then. */
  private take(charges: Charge[]): Promise<MultiResult> {
    const late = (reply: unknown) => this.undoLate(charges, checkReply(charges, reply));
    return this.link.send(charges[0].key, checkArgs(charges), late).then((reply) => multiResult(charges, checkReply(charges, reply)));
  }

  /**
   * The reply of a take() that timed out (the request was answered by
   * onUnavailable), arrived: when it admitted, its units are refunded and
   * its leases released at once, so the check never charges later.
   */
  private undoLate(charges: Charge[], reply: MultiReply) {
    const { allowed, limits } = multiResult(charges, reply);
    if (!allowed) return; // a denial took nothing
    limits.forEach((taken, i) => this.giveBack(charges[i], taken).catch((error) => this.log(`rate limiter: giving back a late check failed: ${String(error)}`)));
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
    return ((await this.link.send(key, releaseArgs(key, leaseId))) as unknown[]).map(Number);
  }

  /**
   * RL.RENEW of each lease; Redis unable to answer is RateLimiterUnavailable
   * (at once while Redis waits for its next try), an error reply as it came.
   */
  private renewAll(charges: Charge[], limits: LimitDecision[]): Promise<boolean> {
    if (this.link.down) return Promise.reject(new RateLimiterUnavailable(new Error(NOT_TRIED)));
    return allRenewed(charges, limits, (charge, leaseId) => this.renewOne(charge, leaseId)).catch((error) => {
      if (isErrorReply(error)) throw error;
      this.link.failed(error);
      throw new RateLimiterUnavailable(error);
    });
  }

  /** RL.RENEW: [renewed, held, reset_after_ms]. */
  private async renewOne(charge: Charge, leaseId: number): Promise<number[]> {
    return ((await this.link.send(charge.key, renewArgs(charge, leaseId))) as unknown[]).map(Number);
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
  private async refundOne(charge: Charge, units: number): Promise<number[] | undefined> {
    if (units <= 0) return undefined;
    return (await this.link.send(charge.key, refundArgs(charge, units))) as number[];
  }
}

/** A limiter over `options.limits`: `check(req)` decides for one request. */
export function createLimiter<Req = any>(options: LimiterOptions<Req>): Limiter<Req> {
  return new Limiter(options);
}

/** While Redis cannot answer, the strictest policy of a request's limits: closed, else local, else open. */
function strictest(charges: Charge[]): OnUnavailable {
  let policy: OnUnavailable = 'open';
  for (const { limit } of charges) {
    if (limit.onUnavailable === 'closed') return 'closed';
    if (limit.onUnavailable === 'local') policy = 'local';
  }
  return policy;
}
