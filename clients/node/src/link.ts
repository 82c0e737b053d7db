// The limiter's connection to Redis and its health: one connection of our
// own, opened on first use and replaced after it broke; after a failure
// Redis is tried again at most once a second, one call at a time (a probe),
// and until one answers, requests get the onUnavailable policy without a
// call. A call that timed out still runs when Redis gets to it (closing
// the connection would not stop what Redis has read already): its reply is
// read when it comes, so that what it took can be given back.

import { Deadlines } from './deadlines.js';
import type { ModeSwitch } from './mode.js';
import type { ClientKind, Connection } from './redis.js';

/** Redis gave no answer within timeoutMs. */
export class RedisTimeout extends Error {}

/** Why a call was not made: Redis failed, and waits for its next try. */
export const NOT_TRIED = 'Redis did not answer the last call; tried again at most once a second';

/** After a failure, how long requests are answered by onUnavailable before Redis is tried again. */
const RETRY_MS = 1000;

/** How long a timed-out call's reply is still awaited; then its connection is closed. */
const LATE_MS = 60_000;

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
   * connection unless this one only timed out (its late replies are still
   * read there).
   */
  failed(error: unknown) {
    this.retryAt = performance.now() + RETRY_MS;
    this.probing = false;
    if (!(error instanceof RedisTimeout)) this.close();
  }

  /** The connection once it can take commands. */
  private ready: Connection | undefined;
  private readonly deadlines: Deadlines;

  constructor(private readonly kind: ClientKind, private readonly timeoutMs: number, private readonly modes: ModeSwitch) {
    this.deadlines = new Deadlines(timeoutMs);
  }

  /**
   * Sends a module call (as the Lua script where the mode says so); `key`
   * routes it. When it times out, a reply that comes later (within
   * LATE_MS) goes to `late`, which gives back what the call took.
   */
  send(key: string, args: string[], late?: (reply: unknown) => void): Promise<unknown> {
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
      this.awaitLate(sending, work, late);
      return new RedisTimeout(`no answer from Redis within ${this.timeoutMs} ms`);
    });
  }

  /** A timed-out call's reply, handed to `late` when it comes; after LATE_MS without one, its connection is closed. */
  private awaitLate(connection: Connection, work: Promise<unknown>, late: ((reply: unknown) => void) | undefined) {
    const giveUp = setTimeout(() => this.drop(connection), LATE_MS);
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
    connection.close();
  }

  close() {
    if (this.connection) this.drop(this.connection);
  }
}
