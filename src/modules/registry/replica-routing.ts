/**
 * A replica's routing part as the routing module keeps it (docs/design.md, "Who writes what"): how
 * many requests routing sent it, and its speed-aware load (contract §4.2). Everyone reads it through
 * `Replica`; only routing's calls below change it, and the fields themselves cannot be assigned
 * (test/structure/ownership.fixture.ts).
 */
export class ReplicaRouting {
  private count = 0;
  private slow = 1;
  private seconds: number | null = null;
  private atOnce: number | undefined = undefined;

  /** Requests routing sent it (a retain, a prefix match or a new pin). */
  get routed(): number {
    return this.count;
  }
  /** Seconds per request over the fleet median: 1 = as fast as the median, within tolerance. */
  get slowness(): number {
    return this.slow;
  }
  /** The estimate itself (null: never measured). */
  get requestSeconds(): number | null {
    return this.seconds;
  }
  /** Under speed-aware load, what it runs at once: its `max_inflight` (routing.policy.ts `batch`). */
  get batch(): number | undefined {
    return this.atOnce;
  }

  /** Routing sent it one more request. */
  countRouted(): void {
    this.count++;
  }

  /** Routing's refresh of the speed estimates (replica-speeds.ts), for the pure policy to read. */
  setSpeed(seconds: number | null, slowness: number, batch: number | undefined): void {
    this.seconds = seconds;
    this.slow = slowness;
    this.atOnce = batch;
  }
}
