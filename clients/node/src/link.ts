// The limiter's connection to Redis and its health: one connection of our
// own, opened on first use and replaced after it broke; after a failure
// Redis is tried again at most once a second, one call at a time (a probe),
// and until one answers, requests get the onUnavailable policy without a
// call. A call that timed out still runs when Redis gets to it (closing
// the connection would not stop what Redis has read already): its reply is
// read when it comes, so that what it took can be given back. Its
// connection is set aside for that and closed once nothing is awaited on
// it; the next calls go on a new one, so a connection that hangs (a peer
// gone without a reset) holds nothing up past the next probe.

import { Deadlines } from './deadlines.js';
import type { ModeSwitch } from './mode.js';
import type { ClientKind, Connection } from './redis.js';

/** Redis gave no answer within timeoutMs. */
export class RedisTimeout extends Error {}

/** Why a call was not made: Redis failed, and waits for its next try. */
export const NOT_TRIED = 'Redis did not answer the last call; tried again at most once a second';

/** After a failure, how long requests are answered by onUnavailable before Redis is tried again. */
const RETRY_MS = 1000;

/** How long a timed-out call's reply is still awaited; then its connection is closed (tests shorten it). */
export const LATE = { ms: 60_000 };

/** Logged when a timed-out call's reply is given up on. */
export const gaveUp = (ms: number) =>
  `rate limiter: no reply within ${ms / 1000} s to a check that timed out: its connection closed (if it ever runs, what it takes stays until the limits' own expiry)`;

export class Link {
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

  /**
   * Redis could not answer: the probe is due in a second, on a fresh
   * connection. One that only timed out is set aside, still read for the
   * late replies (set aside here, once the check is over, so that the
   * other slots of a cluster check gave back what they took on it first).
   */
  failed(error: unknown) {
    this.retryAt = performance.now() + RETRY_MS;
    this.probing = false;
    const connection = this.connection;
    if (!connection) return;
    if (!(error instanceof RedisTimeout) || !this.inFlight.has(connection)) return this.drop(connection);
    this.connection = undefined;
    this.ready = undefined;
    this.setAside.add(connection);
  }

  /** The connection once it can take commands. */
  private ready: Connection | undefined;
  private readonly deadlines: Deadlines;
  /** Calls sent and not answered yet, per connection. */
  private readonly inFlight = new Map<Connection, number>();
  /** Connections set aside after a timeout, closed once nothing is in flight on them. */
  private readonly setAside = new Set<Connection>();

  constructor(
    private readonly kind: ClientKind,
    private readonly timeoutMs: number,
    private readonly modes: ModeSwitch,
    private readonly log: (line: string) => void,
  ) {
    this.deadlines = new Deadlines(timeoutMs);
  }

  /**
   * Sends a module call (as the Lua script where the mode says so); `key`
   * routes it. When it times out, a reply that comes later (within
   * LATE.ms) goes to `late`, which gives back what the call took.
   */
  send(key: string, args: string[], late?: (reply: unknown) => void): Promise<unknown> {
    // Closed: nothing opens again (a late reply's undo included); Redis counts as unavailable.
    if (this.closed) return Promise.reject(new Error('the rate limiter was closed'));
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
    this.track(sending, work);
    return this.deadlines.within(work, () => {
      this.awaitLate(sending, work, late);
      return new RedisTimeout(`no answer from Redis within ${this.timeoutMs} ms`);
    });
  }

  private track(connection: Connection, work: Promise<unknown>) {
    this.inFlight.set(connection, (this.inFlight.get(connection) ?? 0) + 1);
    const settled = () => {
      const left = (this.inFlight.get(connection) ?? 1) - 1;
      if (left > 0) return this.inFlight.set(connection, left);
      this.inFlight.delete(connection);
      if (this.setAside.has(connection)) this.drop(connection);
    };
    work.then(settled, settled);
  }

  /**
   * A timed-out call's reply, handed to `late` when it comes; after LATE.ms
   * without one, its connection is closed, logged once.
   */
  private awaitLate(connection: Connection, work: Promise<unknown>, late: ((reply: unknown) => void) | undefined) {
    const waitMs = LATE.ms;
    const giveUp = setTimeout(() => {
      if (this.setAside.has(connection) || this.connection === connection) this.log(gaveUp(waitMs));
      this.drop(connection);
    }, waitMs);
    giveUp.unref();
    work.then(
      (reply) => {
        clearTimeout(giveUp);
        late?.(reply);
      },
      () => clearTimeout(giveUp),
    );
  }

  private drop(connection: Connection) {
    if (this.connection === connection) this.connection = undefined;
    if (this.ready === connection) this.ready = undefined;
    this.setAside.delete(connection);
    connection.close();
  }

  private closed = false;

  /** Closes every connection, those still awaiting late replies too, for good. */
  close() {
    this.closed = true;
    for (const connection of [...this.setAside]) this.drop(connection);
    if (this.connection) this.drop(this.connection);
  }
}
