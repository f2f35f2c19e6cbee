/** Monotonic millisecond clock, injectable so tests never sleep. */
export abstract class Clock {
  abstract now(): number;
}

export class SystemClock extends Clock {
  now(): number {
    return performance.now();
  }
}

/** A clock tests move by hand. */
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
