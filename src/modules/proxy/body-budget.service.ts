import { Inject, Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { RouterConfig } from '../../config/router-config.js';

/**
 * The router-wide budget of request-body bytes held in memory at once (`--body-memory`, contract §3).
 * A body with a declared length takes its whole size before a byte is read; a chunked body takes
 * each chunk as it arrives. A body that does not fit is refused (503 `overloaded`); bodies already
 * taken are never dropped. A body is given back when its exchange ends (the exchange holds the
 * bytes until then, for a retry on another replica).
 */
@Injectable()
export class BodyBudget {
  readonly capacity: number;
  private held = 0;

  constructor(@Inject(RouterConfig) config: RouterConfig) {
    this.capacity = config.bodyMemoryBytes;
  }

  /** Bytes currently taken. */
  get inUse(): number {
    return this.held;
  }

  /** Take `n` bytes; false (and nothing taken) when they would exceed the budget. */
  take(n: number): boolean {
    if (this.held + n > this.capacity) return false;
    this.held += n;
    return true;
  }

  /** Give `n` bytes back when `res` closes (at once if it already has). */
  giveOnClose(res: ServerResponse, n: number): void {
    if (n === 0) return;
    if (res.closed) this.give(n);
    else res.once('close', () => this.give(n));
  }

  give(n: number): void {
    this.held = Math.max(0, this.held - n);
  }
}
