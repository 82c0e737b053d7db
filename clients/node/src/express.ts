// The Express middleware (Express 4 and 5). Its types describe only what
// it uses, so an app needs no Express types to compile against it.

import { IncomingMessage } from 'node:http';

import { mergedHeaders } from './headers.js';
import { decideRequest, settleAfter, splitOptions, type CheckedHttp, type MiddlewareOptions, type NodeResponse, type Outcome } from './http.js';
import type { Decision } from './decision.js';
import type { Limiter } from './limiter.js';
import type { Limit } from './options.js';

// `req.rateLimit` on Express's own Request type, as Passport adds `req.user`:
// @types/express's Request extends the global Express.Request. Optional,
// since a request that Redis could not limit (failing open) has none.
declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      rateLimit?: Decision;
    }
  }
}

/** What the middleware reads of an Express request. */
export interface ExpressLikeRequest {
  ip?: string | undefined;
  socket?: { remoteAddress?: string | undefined } | undefined;
  rateLimit?: Decision | undefined;
}

/** What it uses of an Express response. */
export interface ExpressLikeResponse extends NodeResponse {
  locals: Record<string, any>;
  getHeader(name: string): unknown;
  setHeader(name: string, value: string | number): unknown;
  end(body: string): unknown;
}

export type ExpressLikeNext = (error?: any) => void;

export interface ExpressRateLimit<Req extends ExpressLikeRequest = any, Res extends ExpressLikeResponse = any> {
  (req: Req, res: Res, next: ExpressLikeNext): Promise<void>;
  /** The limiter behind it, for check() and close(). */
  limiter: Limiter<Req>;
  /** A middleware for these limits and `extra` ones, in one call (a route's limits on the app's). */
  with(extra: Limit<Req> | Limit<Req>[]): ExpressRateLimit<Req, Res>;
}

/**
 * A 429 or 503 written on Node's response itself. Express's res.json also
 * hashes the body for an ETag and parses the content type back: 101 against
 * 85 µs of app CPU a denied request in make bench-http's app, and a flood is
 * all denials. A `handler` answers through Express when that is wanted.
 */
function sendJson(res: ExpressLikeResponse, status: number, body: object) {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/** Request prototypes (Express's per-app `app.request`) whose `rateLimit` is readFromLocals. */
const exposing = new WeakSet<object>();

/**
 * The decision on `res.locals.rateLimit` and `req.rateLimit`. The latter is
 * an accessor beside Express's own (`req.ip`...) on its request prototype,
 * set up once, reading `req.res.locals`: a property of every request's own
 * cost about 4 µs of app CPU a request in make bench-http's app (each
 * request object took a new property), more than the rest of the answer.
 * So once it is set up, reading `req.rateLimit` back is the whole check
 * (asking whether the request has a property of its own was 0.3% of the
 * app's CPU in a profile). A request that is not Express's, or has a
 * `rateLimit` of its own (assigned by other code), gets the property itself.
 */
function putOnRequest(req: ExpressLikeRequest & { res?: unknown }, res: ExpressLikeResponse, decision: Decision) {
  res.locals.rateLimit = decision;
  if (req.rateLimit === decision) return;
  if (req.res !== res || !exposes(Object.getPrototypeOf(req)) || req.rateLimit !== decision) req.rateLimit = decision;
}

function readFromLocals(this: { res?: { locals?: { rateLimit?: Decision } } }): Decision | undefined {
  return this.res?.locals?.rateLimit;
}

function ownProperty(this: object, value: unknown) {
  Object.defineProperty(this, 'rateLimit', { value, writable: true, enumerable: true, configurable: true });
}

/** The first of `start` and the prototypes above it that `test` accepts, if any. */
function upFrom(start: object, test: (prototype: object) => boolean): object | undefined {
  for (let p: object | null = start; p !== null; p = Object.getPrototypeOf(p)) if (test(p)) return p;
  return undefined;
}

/**
 * Whether requests of this prototype read `rateLimit` from `res.locals`;
 * defines it on Express's request object (the prototype just above Node's
 * IncomingMessage, shared by every app and sub-app) when nothing has one.
 */
function exposes(prototype: object | null): boolean {
  if (prototype === null) return false;
  if (exposing.has(prototype)) return true;
  if ('rateLimit' in prototype) {
    const holder = upFrom(prototype, (p) => Object.hasOwn(p, 'rateLimit'));
    if (Object.getOwnPropertyDescriptor(holder!, 'rateLimit')?.get !== readFromLocals) return false; // another's
  } else {
    const express = upFrom(prototype, (p) => Object.getPrototypeOf(p) === IncomingMessage.prototype);
    if (express === undefined) return false;
    Object.defineProperty(express, 'rateLimit', { configurable: true, get: readFromLocals, set: ownProperty });
  }
  exposing.add(prototype);
  return true;
}

function middleware<Req extends ExpressLikeRequest, Res extends ExpressLikeResponse>(
  limiter: Limiter<Req>,
  http: CheckedHttp<Req, Res>,
): ExpressRateLimit<Req, Res> {
  const respond = (outcome: Outcome, req: Req, res: Res, next: ExpressLikeNext): unknown => {
    if (outcome.action === 'unavailable') return sendJson(res, outcome.status, outcome.body);
    const fields = mergedHeaders(outcome.headers, (name) => res.getHeader(name));
    for (const name in fields) res.setHeader(name, fields[name]);
    if (outcome.decision) putOnRequest(req, res, outcome.decision);
    if (outcome.action === 'deny') {
      if (http.handler) return http.handler(req, res, outcome.decision);
      return sendJson(res, outcome.status, outcome.body);
    }
    settleAfter(http, outcome.decision, res, limiter.log);
    next();
  };
  const handle = (req: Req, res: Res, next: ExpressLikeNext): Promise<void> =>
    decideRequest(limiter, http, req)
      .then((outcome) => respond(outcome, req, res, next))
      .then(undefined, next);
  return Object.assign(handle, {
    limiter,
    with: (extra: Limit<Req> | Limit<Req>[]) => middleware(limiter.with(extra), http),
  });
}

/**
 * Express middleware: one Redis call over all the limits of a request,
 * RateLimit headers, 429 on a denial, the decision on `req.rateLimit`
 * and `res.locals.rateLimit`.
 */
export function rateLimit<Req extends ExpressLikeRequest = any, Res extends ExpressLikeResponse = any>(
  options: MiddlewareOptions<Req, Res>,
): ExpressRateLimit<Req, Res> {
  const { limiter, http } = splitOptions(options);
  return middleware(limiter, http);
}
