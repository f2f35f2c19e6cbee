import { performance } from 'node:perf_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';

/** One write of the state file (a snapshot) or of its journal (an append), as the metrics see it. */
export interface StateWrite {
  readonly kind: 'snapshot' | 'journal';
  readonly ok: boolean;
  readonly seconds: number;
  /** The longest stretch the write's encoding held the event loop. */
  readonly loopHoldSeconds: number;
}

/**
 * How long a sliced writer (the state file's snapshot and journal encoders) held the event loop:
 * the longest stretch between the moment it got the loop back (`resume`, or its creation) and the
 * moment it gave the loop up (`pause`, before an await). Garbage collections and the process not
 * being scheduled within a stretch count in it, as they do in any lag the requests see.
 */
export class LoopHold {
  private readonly startedAt = performance.now();
  private since = this.startedAt;
  private longest = 0;

  /** The longest stretch so far, in milliseconds. */
  get longestMs(): number {
    return this.longest;
  }

  /** The writer gives the loop up (an await follows). */
  pause(): void {
    this.longest = Math.max(this.longest, performance.now() - this.since);
  }

  /** The writer has the loop again. */
  resume(): void {
    this.since = performance.now();
  }

  /** What the write that this measured came to. */
  written(kind: StateWrite['kind'], ok: boolean): StateWrite {
    return { kind, ok, seconds: (performance.now() - this.startedAt) / 1000, loopHoldSeconds: this.longest / 1000 };
  }

  /** Gives the event loop one turn between two slices. */
  async turn(): Promise<void> {
    this.pause();
    await nextTurn();
    this.resume();
  }
}
