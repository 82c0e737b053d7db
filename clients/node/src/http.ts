// What the Express middleware and the Fastify plugin share: their options
// (checked at setup) and one request's path through the limiter.

import { DEFAULT_MESSAGE, deniedBody, HEADER_STYLES, rateLimitHeaders, UNAVAILABLE_BODY, type HeaderStyle } from './headers.js';
import { RateLimiterUnavailable, type Decision } from './decision.js';
import { createLimiter, type Limiter, type LimiterOptions } from './limiter.js';
import { checkFunction, RateLimitConfigError } from './options.js';

export interface HttpOptions<Req, Res> {
  /** True (may be async): this request is not limited at all. */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /** Replaces the 429 answer. */
  handler?: (req: Req, res: Res, decision: Decision) => unknown;
  /** The status of a denial, 429 by default. */
  statusCode?: number;
  /** The message of the 429 body. */
  message?: string;
  /** Responses with status >= 400 give their units back. */
  skipFailedRequests?: boolean;
  /** Responses with status < 400 give their units back. */
  skipSuccessfulRequests?: boolean;
  /** Leaky bucket limits: delay an admitted request by its delay_ms (pacing) before it runs. */
  throttle?: boolean;
  /**
   * The rate limit fields of every response: `true` or `'draft-10'` (the
   * default: RateLimit-Policy and RateLimit), `'draft-6'` (RateLimit-Limit,
   * -Remaining, -Reset), `'legacy'` (X-RateLimit-*), or `false`. A 429
   * that can pass later carries Retry-After whatever the choice.
   */
  headers?: boolean | 'draft-10' | 'draft-6' | 'legacy';
}

export type MiddlewareOptions<Req = any, Res = any> = LimiterOptions<Req> & HttpOptions<Req, Res>;

const HTTP_OPTIONS = ['skip', 'handler', 'statusCode', 'message', 'skipFailedRequests', 'skipSuccessfulRequests', 'throttle', 'headers'];

export interface CheckedHttp<Req, Res> {
  skip: ((req: Req) => boolean | Promise<boolean>) | undefined;
  handler: ((req: Req, res: Res, decision: Decision) => unknown) | undefined;
  statusCode: number;
  message: string;
  skipFailedRequests: boolean;
  skipSuccessfulRequests: boolean;
  throttle: boolean;
  headers: HeaderStyle;
}

function flag(name: string, value: unknown): boolean {
  if (value !== undefined && typeof value !== 'boolean') throw new RateLimitConfigError(name, 'must be true or false');
  return value === true;
}

function headerStyle(value: unknown): HeaderStyle {
  if (value === undefined || value === true) return 'draft-10';
  if (!HEADER_STYLES.includes(value as HeaderStyle)) {
    throw new RateLimitConfigError('headers', `must be true, 'draft-10', 'draft-6', 'legacy' or false (got ${String(value)})`);
  }
  return value as HeaderStyle;
}

/** Splits and checks the options: the limiter's, and the HTTP ones. */
export function splitOptions<Req, Res>(options: MiddlewareOptions<Req, Res>): { limiter: Limiter<Req>; http: CheckedHttp<Req, Res> } {
  if (typeof options !== 'object' || options === null) throw new RateLimitConfigError('options', 'must be an object');
  const limiterOptions: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(options)) {
    if (!HTTP_OPTIONS.includes(name)) limiterOptions[name] = value;
  }
  checkFunction('skip', options.skip);
  checkFunction('handler', options.handler);
  const statusCode = options.statusCode ?? 429;
  if (!Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599) {
    throw new RateLimitConfigError('statusCode', `must be an HTTP error status 400..599 (got ${String(statusCode)})`);
  }
  if (options.message !== undefined && typeof options.message !== 'string') {
    throw new RateLimitConfigError('message', 'must be a string');
  }
  const http = {
    skip: options.skip,
    handler: options.handler,
    statusCode,
    message: options.message ?? DEFAULT_MESSAGE,
    skipFailedRequests: flag('skipFailedRequests', options.skipFailedRequests),
    skipSuccessfulRequests: flag('skipSuccessfulRequests', options.skipSuccessfulRequests),
    throttle: flag('throttle', options.throttle),
    headers: headerStyle(options.headers),
  };
  return { limiter: createLimiter(limiterOptions as unknown as LimiterOptions<Req>), http };
}

/** What a framework does with one request. */
export type Outcome =
  | { action: 'next'; decision: Decision | null; headers: Record<string, string> }
  | { action: 'deny'; decision: Decision; headers: Record<string, string>; status: number; body: object }
  | { action: 'unavailable'; status: 503; body: object };

/**
 * The limiters that charged a request (its first one alone, or all in
 * order), kept on the admitted decision the framework puts on the request
 * (`req.rateLimit`), so a stacked limiter skips their limits. (A property
 * of its own on the request cost a few microseconds a request in Express.)
 */
const CHARGED = Symbol.for('redis-ratelimit-client.charged'); // shared by the package's ESM and CommonJS builds

type Charged = Limiter<any> | Limiter<any>[];

type MarkedDecision = Decision & { [CHARGED]?: Charged };

/** A request as the frameworks leave it: the last decision on it, if any. */
type Decided = { rateLimit?: MarkedDecision | null };

/**
 * The limits a stacked limiter of the same family (made with `with()`)
 * charged already. Another limiter's policy of the same name would share
 * its Redis key and its header name: a misconfiguration, refused.
 */
function chargedBefore(limiter: Limiter<any>, charged: Charged | undefined): ReadonlySet<string> | undefined {
  if (charged === undefined) return undefined; // the first limiter on the request
  const names = new Set<string>();
  for (const earlier of Array.isArray(charged) ? charged : [charged]) {
    for (const { name } of earlier.limits) {
      if (earlier.family === limiter.family) names.add(name);
      else if (limiter.limits.some((l) => l.name === name)) {
        throw new RateLimitConfigError('name', `policy ${JSON.stringify(name)} is used by two limiters on one request: give each its own name, or stack them with with()`);
      }
    }
  }
  return names;
}

const UNLIMITED: Outcome = { action: 'next', decision: null, headers: {} };

/**
 * Runs one request through the limiter. Redis's error replies and bad
 * per-request values reject (the framework's error path).
 */
export function decideRequest<Req extends object, Res>(limiter: Limiter<Req>, http: CheckedHttp<Req, Res>, req: Req): Promise<Outcome> {
  if (http.skip) return skipOrDecide(limiter, http, req, http.skip);
  return decideUnskipped(limiter, http, req);
}

async function skipOrDecide<Req extends object, Res>(limiter: Limiter<Req>, http: CheckedHttp<Req, Res>, req: Req, skip: (req: Req) => boolean | Promise<boolean>) {
  return (await skip(req)) ? UNLIMITED : decideUnskipped(limiter, http, req);
}

/** The request's decision, as the framework acts on it (no async frame: each was a promise and a resumption). */
function decideUnskipped<Req extends object, Res>(limiter: Limiter<Req>, http: CheckedHttp<Req, Res>, req: Req): Promise<Outcome> {
  try {
    const charged = (req as Decided).rateLimit?.[CHARGED];
    return limiter.check(req, chargedBefore(limiter, charged)).then((decision) => outcomeOf(limiter, http, decision, charged), unavailable);
  } catch (error) {
    return Promise.reject(error);
  }
}

function unavailable(error: unknown): Outcome {
  if (error instanceof RateLimiterUnavailable) return { action: 'unavailable', status: 503, body: UNAVAILABLE_BODY };
  throw error;
}

function outcomeOf(limiter: Limiter<any>, http: CheckedHttp<any, any>, decision: Decision | null, charged: Charged | undefined): Outcome | Promise<Outcome> {
  if (decision === null) return UNLIMITED;
  const headers = decision.limits.length === 0 ? {} : rateLimitHeaders(decision, http.headers);
  if (!decision.allowed) {
    return { action: 'deny', decision, headers, status: http.statusCode, body: deniedBody(decision, http.message) };
  }
  (decision as MarkedDecision)[CHARGED] = charged === undefined ? limiter : [...(Array.isArray(charged) ? charged : [charged]), limiter];
  const outcome: Outcome = { action: 'next', decision, headers };
  if (http.throttle && decision.delayMs > 0) return new Promise((resolve) => setTimeout(() => resolve(outcome), decision.delayMs));
  return outcome;
}

/** What both frameworks' Node response (Express's `res`, Fastify's `reply.raw`) tells of its end. */
export interface NodeResponse {
  statusCode: number;
  writableFinished?: boolean;
  destroyed?: boolean;
  end(...args: any[]): unknown;
  once(event: 'finish' | 'close', listener: () => void): unknown;
}

/**
 * What an admitted request gives back once it is over: its leases when the
 * handler is done with the response (below); its units, as the skip
 * options say, when the response is sent or its connection closed first
 * (a failed request then). Failures are logged: the response is gone.
 */
export function settleAfter(http: CheckedHttp<any, any>, decision: Decision | null, res: NodeResponse, log: (line: string) => void) {
  if (!decision || !decision.allowed) return;
  if (decision.limits.some((l) => l.leaseId)) releaseAtEnd(decision, res);
  if (!http.skipFailedRequests && !http.skipSuccessfulRequests) return;
  let done = false;
  const settle = () => {
    if (done) return;
    done = true;
    // A connection closed before the response finished counts as failed.
    const failed = !res.writableFinished || res.statusCode >= 400;
    if ((failed && http.skipFailedRequests) || (!failed && http.skipSuccessfulRequests)) {
      decision.refund().catch((error) => log(`rate limiter refund failed: ${String(error)}`));
    }
  };
  if (res.destroyed) return settle(); // the client left while the limiter decided
  res.once('finish', settle);
  res.once('close', settle);
}

/**
 * Frees the decision's slots when the handler is done: when it calls the
 * response's end() (an answer, a streamed one's last chunk, its error
 * answered), just before the last bytes go out, so a client that sends its
 * next request on receipt finds its slot free. Not when the client
 * disconnects: the handler still runs and loads what the limit protects.
 * A handler that never ends holds its slots until their lease runs out.
 */
function releaseAtEnd(decision: Decision, res: NodeResponse) {
  const end = res.end;
  res.end = function (this: unknown, ...args: unknown[]) {
    void decision.release(); // once, however often end() is called
    return end.apply(this, args);
  };
}

