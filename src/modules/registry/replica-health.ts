/** One probe's outcome, as `GET /replicas` shows it. */
export interface HealthResult {
  readonly ok: boolean;
  /** Wall-clock ISO time of the probe. */
  readonly at: string;
  readonly status?: number;
  readonly error?: string;
}

/**
 * A replica's health as the health module keeps it (docs/design.md, "Who writes what"): readiness
 * and its fall/rise counts, the last probe, and the load its engine reports beyond this router's.
 * Everyone reads it through `Replica`; only health's calls below change it, and the fields
 * themselves cannot be assigned (test/structure/ownership.fixture.ts).
 */
export class ReplicaHealth {
  private isReady: boolean;
  private wasReady: boolean;
  private fails = 0;
  private passes = 0;
  private last: HealthResult | null = null;
  private foreign = 0;
  private engineOk: boolean | null = null;

  constructor(ready: boolean, everReady: boolean) {
    this.isReady = ready;
    this.wasReady = everReady;
  }

  get ready(): boolean {
    return this.isReady;
  }
  /** Ready at least once. */
  get everReady(): boolean {
    return this.wasReady;
  }
  /** Consecutive failed and passed checks, for the fall/rise hysteresis. */
  get failures(): number {
    return this.fails;
  }
  get successes(): number {
    return this.passes;
  }
  get lastHealth(): HealthResult | null {
    return this.last;
  }
  /** With several routers: requests the engine reported beyond this router's own at the last sample; 0 with one router. */
  get foreignLoad(): number {
    return this.foreign;
  }
  /** With `engineMetrics`: whether the last scrape could be read (null before the first); while false, `foreignLoad` is 0. */
  get engineMetricsOk(): boolean | null {
    return this.engineOk;
  }

  /** A probe answered (or not). */
  probed(result: HealthResult): void {
    this.last = result;
  }

  /** One passed check; returns how many in a row. */
  passed(): number {
    this.fails = 0;
    return ++this.passes;
  }

  /** One failed check; returns how many in a row. */
  failed(): number {
    this.passes = 0;
    return ++this.fails;
  }

  /** A connection refused: at least `fall` failures at once. */
  refused(fall: number): void {
    this.passes = 0;
    this.fails = Math.max(this.fails, fall);
  }

  setReady(ready: boolean): void {
    this.isReady = ready;
    if (ready) this.wasReady = true;
  }

  engineLoad(foreign: number): void {
    this.foreign = foreign;
  }

  engineMetricsRead(ok: boolean): void {
    this.engineOk = ok;
  }
}
