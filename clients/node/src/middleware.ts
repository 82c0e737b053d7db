// An Express middleware: one limiter call per request, RateLimit headers on
// every response, 429 on denial.

import type { Request, RequestHandler, Response } from 'express';

import { deniedBody, rateLimitHeaders } from './headers.js';
import { checkRateLimit, type CommandSender, type LimitOptions } from './limiter.js';

export interface MiddlewareOptions {
  /** A connected node-redis client (`createClient({ disableOfflineQueue: true })` fails fast when Redis is down). */
  redis: CommandSender;
  /** The limit, or a function choosing it per request (per route, per plan...). */
  limit: LimitOptions | ((req: Request) => LimitOptions);
  /** Who the request counts against: the client's IP by default. */
  key?: (req: Request) => string;
  /** Also send RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset. */
  legacyHeaders?: boolean;
  /** When Redis cannot answer: let requests through (true, the default) or answer 503. */
  failOpen?: boolean;
  /** Milliseconds to wait for Redis before treating it as down; 1000 by default. */
  timeoutMs?: number;
  /** Where the line about an unreachable Redis goes; console.warn by default. */
  log?: (line: string) => void;
  /** The 429 body's message. */
  message?: string;
}

/** Keys by the client's address. */
export const byIp = (req: Request): string => `ip:${req.ip ?? req.socket.remoteAddress ?? 'unknown'}`;

/** Keys by a header such as `x-api-key`, falling back to the address. */
export const byHeader =
  (name: string) =>
  (req: Request): string => {
    const value = req.get(name);
    return value ? `${name}:${value}` : byIp(req);
  };

/** Keys by the signed-in user (`req.user.id`, as Passport and most auth middleware set it), else by address. */
export const byUser = (req: Request): string => {
  const user = (req as Request & { user?: { id?: string | number } }).user;
  return user?.id === undefined ? byIp(req) : `user:${user.id}`;
};

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer from Redis within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const LISTS = ['RateLimit-Policy', 'RateLimit'];

/**
 * Sets the headers of one more limiter on a response that may carry some
 * already (a route's limit before the app's): the IETF fields are lists,
 * so items are appended; the older trio describes the policy with the
 * least remaining, and Retry-After is the longest wait.
 */
function mergeHeaders(res: Response, headers: Record<string, string>) {
  const previous = res.get('RateLimit-Remaining');
  const keepLegacy = previous !== undefined && Number(previous) <= Number(headers['RateLimit-Remaining']);
  for (const [name, value] of Object.entries(headers)) {
    const current = res.get(name);
    if (current === undefined) {
      res.set(name, value);
    } else if (LISTS.includes(name)) {
      res.set(name, `${current}, ${value}`);
    } else if (name === 'Retry-After') {
      res.set(name, String(Math.max(Number(current), Number(value))));
    } else if (!keepLegacy) {
      res.set(name, value);
    }
  }
}

export function rateLimit(options: MiddlewareOptions): RequestHandler {
  const key = options.key ?? byIp;
  const log = options.log ?? ((line: string) => console.warn(line));
  return async (req, res, next) => {
    const limit = typeof options.limit === 'function' ? options.limit(req) : options.limit;
    let decision;
    try {
      const call = checkRateLimit(key(req), { ...limit, redis: options.redis });
      decision = await withTimeout(call, options.timeoutMs ?? 1000);
    } catch (error) {
      const failOpen = options.failOpen ?? true;
      log(`rate limiter unavailable (${failOpen ? 'letting the request through' : 'refusing it'}): ${String(error)}`);
      if (failOpen) {
        next();
      } else {
        res.status(503).json({ error: 'rate_limiter_unavailable' });
      }
      return;
    }
    mergeHeaders(res, rateLimitHeaders(decision, options.legacyHeaders));
    if (decision.allowed) {
      next();
    } else {
      res.status(429).json(deniedBody(decision, options.message));
    }
  };
}
