import type { Clock } from '../../common/clock.js';
import type { Replica } from '../registry/replica.js';
import { SpeedEstimator, type SpeedEstimatorOptions } from './speed-estimator.js';

/** How often the replicas' `slowness` is recomputed from the estimates (the policy reads the field). */
export const SPEED_REFRESH_MS = 100;

/**
 * Speed-aware load (contract §4.2) on the live table: the data plane reports each finished request's
 * time in flight, and before routing the replicas' `slowness`, `requestSeconds` and `batch` are refreshed
 * (at most every {@link SPEED_REFRESH_MS}) for the pure policy to read.
 */
export class ReplicaSpeeds {
  readonly estimator: SpeedEstimator<Replica>;
  private refreshedAt = -Infinity;

  constructor(
    private readonly clock: Clock,
    options: Partial<SpeedEstimatorOptions> = {},
  ) {
    this.estimator = new SpeedEstimator(clock, options);
  }

  observe(r: Replica, seconds: number): void {
    this.estimator.observe(r, seconds);
  }

  forget(r: Replica): void {
    this.estimator.forget(r);
  }

  /** Recompute every replica's slowness when the last refresh is older than the period (or `force`). */
  refresh(list: readonly Replica[], force = false): void {
    const now = this.clock.now();
    if (!force && now - this.refreshedAt < SPEED_REFRESH_MS) return;
    this.refreshedAt = now;
    const f = this.estimator.factors(list);
    for (let i = 0; i < list.length; i++) {
      const r = list[i];
      r.routing.setSpeed(f[i].seconds, f[i].slowness, r.maxInflight);
    }
  }
}
