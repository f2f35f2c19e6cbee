/** A clock tests move by hand. Test-only (`*.fake.ts` is not in the prod build). */
import { Clock } from './clock.js';

export class ManualClock extends Clock {
  constructor(private t = 0) {
    super();
  }
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}
