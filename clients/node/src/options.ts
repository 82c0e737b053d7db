// Every option is checked when a limiter is created: a bad one throws,
// naming it, so a typo can never silently turn limiting off.

import { serializeString } from 'structured-headers';

import { isIpv6Subnet } from './keys.js';

/** The module's five rate algorithms and its concurrency limit, by their name in a limit spec. */
export type Algorithm = 'tokenbucket' | 'leakybucket' | 'fixedwindow' | 'slidingwindow' | 'slidinglog' | 'concurrency';

/** The draft's registered quota units (`qu`). */
export type QuotaUnit = 'requests' | 'content-bytes' | 'concurrent-requests';

/** A value, or a function of the request giving it (possibly async). */
export type PerRequest<Req, T> = T | ((req: Req) => T | Promise<T>);

/** One limit: an algorithm, its two parameters, what a request costs and whom it counts against. */
export interface Limit<Req = any> {
  /** `tokenbucket` by default. */
  algorithm?: Algorithm;
  /** The bucket's capacity, or the window's limit: an integer from 1 to 2^53-1; may be a function of the request (per plan). */
  limit: PerRequest<Req, number>;
  /** Buckets only: units per second. */
  rate?: number;
  /** Window algorithms only: the window in seconds (0.001 and up). */
  window?: number;
  /** Concurrency only: seconds a slot stays held when it is never released (0.001 and up). */
  lease?: number;
  /** Units this request takes (slots, for concurrency), 1 by default; may be a function of the request. */
  cost?: PerRequest<Req, number>;
  /** Whom the request counts against; the limiter's `key` when left out. */
  key?: (req: Req) => string | Promise<string>;
  /** The policy's name in the RateLimit headers and the Redis key; `default` for a lone limit. */
  name?: string;
  /** The draft's `qu`; requests when left out (concurrent-requests, and only that, for concurrency). */
  quotaUnit?: QuotaUnit;
  /** What this limit does while Redis cannot answer; the limiter's `onUnavailable` by default, `local` for a concurrency limit. */
  onUnavailable?: OnUnavailable;
  /** Concurrency only: the seconds a denial's Retry-After suggests (slots free as requests end, not as leases run out); 1 by default. */
  retryAfter?: number;
}

/** A limit after checking: every field set. */
export interface CheckedLimit<Req = any> {
  algorithm: Algorithm;
  limit: PerRequest<Req, number>;
  /** rate (buckets), window (windows) or lease (concurrency), as the module takes it. */
  param: number;
  cost: PerRequest<Req, number>;
  key: ((req: Req) => string | Promise<string>) | undefined;
  name: string;
  /** False for a lone limit left without a name: its Redis key then says what it is (keyName). */
  named: boolean;
  quotaUnit: QuotaUnit | undefined;
  /** While Redis cannot answer: resolved (the limit's own, else a concurrency limit's `local`, else the limiter's). */
  onUnavailable: OnUnavailable;
  /** Concurrency: a denial's longest retry time, in ms (the limit's `retryAfter`); undefined for the other algorithms. */
  retryAfterMs: number | undefined;
}

export const ALGORITHMS: readonly Algorithm[] = ['tokenbucket', 'leakybucket', 'fixedwindow', 'slidingwindow', 'slidinglog', 'concurrency'];
const QUOTA_UNITS: readonly QuotaUnit[] = ['requests', 'content-bytes', 'concurrent-requests'];
const LIMIT_OPTIONS = ['algorithm', 'limit', 'rate', 'window', 'lease', 'cost', 'key', 'name', 'quotaUnit', 'onUnavailable', 'retryAfter'];
const ON_UNAVAILABLE: readonly OnUnavailable[] = ['open', 'closed', 'local'];

/** Each algorithm's second parameter: the option that gives it, what it is, and its range. */
const PARAMS: Record<Algorithm, { option: 'rate' | 'window' | 'lease'; meaning: string; min: number }> = {
  tokenbucket: { option: 'rate', meaning: 'units per second', min: 0.000001 },
  leakybucket: { option: 'rate', meaning: 'units per second', min: 0.000001 },
  fixedwindow: { option: 'window', meaning: 'seconds', min: 0.001 },
  slidingwindow: { option: 'window', meaning: 'seconds', min: 0.001 },
  slidinglog: { option: 'window', meaning: 'seconds', min: 0.001 },
  concurrency: { option: 'lease', meaning: 'seconds a slot is held unless released', min: 0.001 },
};
export const MAX_INTEGER = Number.MAX_SAFE_INTEGER;

/** A bad option, named in the message. */
export class RateLimitConfigError extends TypeError {
  constructor(readonly option: string, problem: string) {
    super(`${option}: ${problem}`);
    this.name = 'RateLimitConfigError';
  }
}

const CONCURRENT = 'concurrent-requests';

export function isBucket(algorithm: Algorithm): boolean {
  return algorithm === 'tokenbucket' || algorithm === 'leakybucket';
}

export function checkInteger(option: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_INTEGER) {
    throw new RateLimitConfigError(option, `must be an integer from ${min} to ${MAX_INTEGER} (got ${String(value)})`);
  }
  return value;
}

function checkNumber(option: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw new RateLimitConfigError(option, `must be a number from ${min} to ${max} (got ${String(value)})`);
  }
  return value;
}

export function checkUnknown(option: string, value: object, known: readonly string[]) {
  for (const name of Object.keys(value)) {
    if (!known.includes(name)) {
      throw new RateLimitConfigError(option ? `${option}.${name}` : name, 'unknown option');
    }
  }
}

export function checkFunction(option: string, value: unknown) {
  if (value !== undefined && typeof value !== 'function') {
    throw new RateLimitConfigError(option, `must be a function (got ${typeof value})`);
  }
}

/** A policy name: printable ASCII, so it serializes as a Structured Field String. */
function checkName(option: string, name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 64) {
    throw new RateLimitConfigError(option, 'must be a string of 1 to 64 characters');
  }
  try {
    serializeString(name);
  } catch {
    throw new RateLimitConfigError(option, `must be printable ASCII, no control characters (got ${JSON.stringify(name)})`);
  }
  return name;
}

function checkOnUnavailable(option: string, value: unknown): OnUnavailable | undefined {
  if (value !== undefined && !ON_UNAVAILABLE.includes(value as OnUnavailable)) {
    throw new RateLimitConfigError(option, `must be 'open', 'closed' or 'local' (got ${String(value)})`);
  }
  return value as OnUnavailable | undefined;
}

/** `fallback`: the limiter's onUnavailable, for a limit that names none (a concurrency limit's default is `local`). */
function checkLimit<Req>(option: string, limit: Limit<Req>, lone: boolean, fallback: OnUnavailable): CheckedLimit<Req> {
  if (typeof limit !== 'object' || limit === null) {
    throw new RateLimitConfigError(option, 'must be an object such as { limit: 60, rate: 1 }');
  }
  checkUnknown(option, limit, LIMIT_OPTIONS);
  const algorithm = limit.algorithm ?? 'tokenbucket';
  if (!ALGORITHMS.includes(algorithm)) {
    throw new RateLimitConfigError(`${option}.algorithm`, `must be one of ${ALGORITHMS.join(', ')} (got ${String(algorithm)})`);
  }
  const size = typeof limit.limit === 'function' ? limit.limit : checkInteger(`${option}.limit`, limit.limit, 1);
  const { option: wanted, meaning, min } = PARAMS[algorithm];
  for (const other of ['rate', 'window', 'lease'] as const) {
    if (other !== wanted && limit[other] !== undefined) {
      throw new RateLimitConfigError(`${option}.${other}`, `${algorithm} takes a ${wanted} (${meaning}), not a ${other}`);
    }
  }
  if (limit[wanted] === undefined) {
    throw new RateLimitConfigError(`${option}.${wanted}`, `required for ${algorithm} (${meaning})`);
  }
  const param = checkNumber(`${option}.${wanted}`, limit[wanted], min, 1e12);
  if (isBucket(algorithm) && typeof size === 'number' && size / param > 1e12) {
    throw new RateLimitConfigError(`${option}.rate`, 'limit / rate must be at most 1e12 seconds');
  }
  const cost = limit.cost ?? 1;
  if (typeof cost !== 'function') checkInteger(`${option}.cost`, cost, 0);
  checkFunction(`${option}.key`, limit.key);
  if (limit.name === undefined && !lone) {
    throw new RateLimitConfigError(`${option}.name`, 'required when a request carries more than one limit');
  }
  const name = checkName(`${option}.name`, limit.name ?? 'default');
  if (limit.quotaUnit !== undefined && !QUOTA_UNITS.includes(limit.quotaUnit)) {
    throw new RateLimitConfigError(`${option}.quotaUnit`, `must be one of ${QUOTA_UNITS.join(', ')}`);
  }
  if (algorithm === 'concurrency' && (limit.quotaUnit ?? CONCURRENT) !== CONCURRENT) {
    throw new RateLimitConfigError(`${option}.quotaUnit`, `a concurrency limit counts ${CONCURRENT}`);
  }
  const quotaUnit = algorithm === 'concurrency' ? CONCURRENT : limit.quotaUnit;
  const onUnavailable = checkOnUnavailable(`${option}.onUnavailable`, limit.onUnavailable) ?? (algorithm === 'concurrency' ? 'local' : fallback);
  if (algorithm !== 'concurrency' && limit.retryAfter !== undefined) {
    throw new RateLimitConfigError(`${option}.retryAfter`, `only a concurrency limit takes a retryAfter hint (${algorithm} has its own retry time)`);
  }
  const retryAfterMs = algorithm === 'concurrency' ? Math.ceil(checkNumber(`${option}.retryAfter`, limit.retryAfter ?? 1, 0.001, 1e12) * 1000) : undefined;
  return { algorithm, limit: size, param, cost, key: limit.key, name, named: limit.name !== undefined, quotaUnit, onUnavailable, retryAfterMs };
}

/**
 * Checks a list of limits (`option` names it in errors); `taken` holds the
 * names already in use by limits stacked with these; `fallback` is the
 * limiter's onUnavailable.
 */
function checkLimits<Req>(option: string, limits: Limit<Req> | Limit<Req>[], taken: string[], fallback: OnUnavailable): CheckedLimit<Req>[] {
  const list = Array.isArray(limits) ? limits : [limits];
  const names = Array.isArray(limits) ? (i: number) => `${option}[${i}]` : () => option;
  if (list.length === 0) {
    throw new RateLimitConfigError(option, 'needs at least one limit');
  }
  const lone = list.length === 1 && taken.length === 0;
  const seen = new Set(taken);
  return list.map((limit, i) => {
    const checked = checkLimit(names(i), limit, lone, fallback);
    if (seen.has(checked.name)) {
      throw new RateLimitConfigError(`${names(i)}.name`, `duplicate policy name ${JSON.stringify(checked.name)}`);
    }
    seen.add(checked.name);
    return checked;
  });
}

/** A value, or its promise when the function that gives it is async. */
export type MaybePromise<T> = T | Promise<T>;

export function isPromise<T>(value: MaybePromise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

/** A cost from a function, checked per request: a bad one is a programming error. A constant was checked at setup. */
export function costOf<Req>(limit: CheckedLimit<Req>, req: Req): MaybePromise<number> {
  if (typeof limit.cost !== 'function') return limit.cost;
  const cost = limit.cost(req);
  const check = (value: number) => checkInteger(`${limit.name}: cost`, value, 0);
  return isPromise(cost) ? cost.then(check) : check(cost);
}

/** The limit for this request, checked the same way when it comes from a function. */
export function sizeOf<Req>(limit: CheckedLimit<Req>, req: Req): MaybePromise<number> {
  if (typeof limit.limit !== 'function') return limit.limit;
  const check = (value: number) => {
    const size = checkInteger(`${limit.name}: limit`, value, 1);
    if (isBucket(limit.algorithm) && size / limit.param > 1e12) {
      throw new RateLimitConfigError(`${limit.name}: limit`, 'limit / rate must be at most 1e12 seconds');
    }
    return size;
  };
  const size = limit.limit(req);
  return isPromise(size) ? size.then(check) : check(size);
}

/** Redis unavailable: let requests through, refuse them (503), or limit them in process. */
export type OnUnavailable = 'open' | 'closed' | 'local';

/** `auto`: the module where a node has it, else the Lua library; `module`; or `script`. */
export type Mode = 'auto' | 'module' | 'script';
export const MODES: readonly Mode[] = ['auto', 'module', 'script'];

/** Script mode: `auto` FCALL where a node allows Redis Functions, else EVALSHA; `fcall` Functions only; `evalsha` never Functions. */
export type ScriptCall = 'auto' | 'fcall' | 'evalsha';
const SCRIPT_CALLS: readonly ScriptCall[] = ['auto', 'fcall', 'evalsha'];

const LIMITER_OPTIONS = ['redis', 'limits', 'key', 'ipv6Subnet', 'prefix', 'timeoutMs', 'onUnavailable', 'failOpen', 'instances', 'log', 'mode', 'scriptCall', 'denialCache', 'onDecision'];

/** A limiter's options after checking, defaults filled in (the functions and the client are checked, and used as given). */
export interface LimiterSettings<Req> {
  limits: CheckedLimit<Req>[];
  ipv6Subnet: number | false;
  prefix: string;
  timeoutMs: number;
  onUnavailable: OnUnavailable;
  instances: number;
  mode: Mode;
  scriptCall: ScriptCall;
  denialCache: number;
}

/**
 * Checks a limiter's options (LimiterOptions in limiter.ts); `base` holds
 * the limits of the limiter it is made from with with(), checked already.
 */
export function checkLimiterOptions<Req>(options: object, base: CheckedLimit<Req>[]): LimiterSettings<Req> {
  if (typeof options !== 'object' || options === null) throw new RateLimitConfigError('options', 'must be an object');
  checkUnknown('', options, LIMITER_OPTIONS);
  const o = options as Record<string, any>;
  if (o.limits === undefined) throw new RateLimitConfigError('limits', 'required, e.g. { limit: 60, rate: 1 }');
  if (o.failOpen !== undefined && typeof o.failOpen !== 'boolean') {
    throw new RateLimitConfigError('failOpen', 'must be true or false');
  }
  checkOnUnavailable('onUnavailable', o.onUnavailable);
  if (o.onUnavailable !== undefined && o.failOpen !== undefined) {
    throw new RateLimitConfigError('failOpen', 'give onUnavailable or failOpen (its older form), not both');
  }
  const onUnavailable: OnUnavailable = o.onUnavailable ?? (o.failOpen === false ? 'closed' : 'open');
  const limits = [...base, ...checkLimits<Req>('limits', o.limits, base.map((l) => l.name), onUnavailable)];
  checkFunction('key', o.key);
  checkFunction('log', o.log);
  checkFunction('onDecision', o.onDecision);
  const ipv6Subnet = o.ipv6Subnet ?? 56;
  if (!isIpv6Subnet(ipv6Subnet)) throw new RateLimitConfigError('ipv6Subnet', 'must be an integer from 1 to 128, or false');
  const prefix = o.prefix ?? 'ratelimit:';
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new RateLimitConfigError('prefix', 'must be a string without { or } (the key adds its own hash tag)');
  }
  const timeoutMs = o.timeoutMs ?? 1000;
  if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RateLimitConfigError('timeoutMs', `must be a positive number of milliseconds (got ${String(timeoutMs)})`);
  }
  const mode = o.mode ?? 'auto';
  if (!MODES.includes(mode)) throw new RateLimitConfigError('mode', `must be 'auto', 'module' or 'script' (got ${String(mode)})`);
  const scriptCall = o.scriptCall ?? 'auto';
  if (!SCRIPT_CALLS.includes(scriptCall)) throw new RateLimitConfigError('scriptCall', `must be 'auto', 'fcall' or 'evalsha' (got ${String(scriptCall)})`);
  const denialCache = checkInteger('denialCache', o.denialCache ?? 10_000, 0);
  const instances = checkInteger('instances', o.instances ?? 1, 1);
  return { limits, ipv6Subnet, prefix, timeoutMs, onUnavailable, instances, mode, scriptCall, denialCache };
}
