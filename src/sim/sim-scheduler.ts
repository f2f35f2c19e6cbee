/**
 * `--max-running`: at most N completions are generated at once; the rest wait in FIFO order
 * (their wait is added to their TTFT), like an engine's running/waiting queues.
 */

/** A request's place in the scheduler; `release()` must be called once when it ends. */
export interface AdmissionTicket {
  /** Leaves the queue, or frees the running slot and starts the next waiter. Idempotent. */
  release(): void;
}

interface Waiter {
  readonly start: () => void;
  state: 'waiting' | 'running' | 'released';
}

/** FIFO admission with a concurrency cap (0 = unlimited). */
export class AdmissionQueue {
  private runningCount = 0;
  private readonly queue = new Set<Waiter>();

  constructor(private readonly maxRunning: number) {}

  /** Completions being generated. */
  get running(): number {
    return this.runningCount;
  }

  /** Completions queued behind the cap. */
  get waiting(): number {
    return this.queue.size;
  }

  /** Calls `start` now if a slot is free (synchronously), else when one frees up. */
  admit(start: () => void): AdmissionTicket {
    const waiter: Waiter = { start, state: 'waiting' };
    if (this.maxRunning === 0 || this.runningCount < this.maxRunning) this.run(waiter);
    else this.queue.add(waiter);
    return { release: () => this.release(waiter) };
  }

  private run(waiter: Waiter, deferred = false): void {
    waiter.state = 'running';
    this.runningCount++;
    // A waiter started by release() runs on a microtask so a chain of instant completions
    // never recurses through release() -> start() -> release().
    if (deferred) queueMicrotask(waiter.start);
    else waiter.start();
  }

  private release(waiter: Waiter): void {
    if (waiter.state === 'waiting') this.queue.delete(waiter);
    if (waiter.state === 'running') {
      this.runningCount--;
      const next = this.queue.values().next();
      if (next.done !== true) {
        this.queue.delete(next.value);
        this.run(next.value, true);
      }
    }
    waiter.state = 'released';
  }
}
