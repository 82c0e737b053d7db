// Timeouts for calls that all wait the same time: one timer, set for the
// oldest call still pending, instead of a timer per call (setting and
// clearing one per request was a visible part of the limiter's CPU).
// Calls start in deadline order, so a queue keeps them sorted.

interface Pending {
  at: number;
  settled: boolean;
  expire(): void;
}

export class Deadlines {
  private queue: Pending[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly ms: number) {}

  /** `work`'s outcome, or `expired()`'s error when it takes longer than the deadline. */
  within<T>(work: Promise<T>, expired: () => unknown): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const pending: Pending = { at: performance.now() + this.ms, settled: false, expire: () => reject(expired()) };
      this.queue.push(pending);
      if (this.timer === undefined) this.arm(this.ms);
      work.then(
        (value) => {
          this.settled(pending);
          resolve(value);
        },
        (error) => {
          this.settled(pending);
          reject(error);
        },
      );
    });
  }

  /**
   * Drops settled calls from the front of the queue. One connection
   * answers in order, so the call settling is nearly always the oldest:
   * the queue stays as long as the calls in flight. (Kept until the timer,
   * a second of calls outlived the young generation: GC was a third of
   * the limiter's CPU.)
   */
  private settled(pending: Pending) {
    pending.settled = true;
    const queue = this.queue;
    while (this.head < queue.length && queue[this.head].settled) this.head++;
    if (this.head === queue.length) {
      queue.length = 0;
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= queue.length) {
      this.queue = queue.slice(this.head);
      this.head = 0;
    }
  }

  private arm(ms: number) {
    this.timer = setTimeout(() => this.expire(), ms);
    this.timer.unref(); // a finished call never holds the process open
  }

  /** Expires the calls past their deadline (skipping settled ones); sets the timer for the next. */
  private expire() {
    this.timer = undefined;
    const now = performance.now();
    while (this.head < this.queue.length) {
      const pending = this.queue[this.head];
      if (!pending.settled && pending.at > now) break;
      this.head++;
      if (!pending.settled) {
        pending.settled = true;
        pending.expire();
      }
    }
    if (this.head === this.queue.length) {
      this.queue = [];
      this.head = 0;
      return;
    }
    this.queue = this.queue.slice(this.head);
    this.head = 0;
    this.arm(this.queue[0].at - now);
  }
}
