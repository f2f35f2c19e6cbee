/** Monotonic millisecond clock, injectable so tests never sleep. */
export abstract class Clock {
  abstract now(): number;
}

export class SystemClock extends Clock {
  now(): number {
    return performance.now();
  }
}
