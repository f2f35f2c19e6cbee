/**
 * How fast each replica has been serving (contract §4.2), from the router's own timings: the seconds a
 * request spends in flight on it, from its body written upstream to the end of the answer. By
 * Little's law that is the reciprocal of completions per second per in-flight request, so it turns
 * an in-flight count into time: the expected wait of one more request is `(load + 1) × seconds`.
 * Why this signal rather than time to first byte or the gaps between chunks: docs/design.md §6.1.
 *
 * Stability rules:
 * - the estimate is the median of the replica's last `window` samples: one long answer (a
 *   thousand-token stream among short ones) or one stall of the host does not move it;
 * - a replica with fewer than `minSamples` samples counts as the fleet median (cold start);
 * - without new samples an estimate decays towards the fleet median (half-life
 *   `staleHalfLifeMs`), so a replica that stopped receiving traffic because it was slow is tried
 *   again once it may have recovered;
 * - `slowness` is the estimate over the fleet median, snapped to exactly 1 within `tolerance` (or
 *   within `minDifference` seconds), so equally fast replicas compare by their in-flight counts
 *   alone, as without speed awareness.
 */
import type { Clock } from '../../common/clock.js';

export interface SpeedEstimatorOptions {
  /** Samples kept per replica; the estimate is their median (default 16). */
  readonly window: number;
  /** Samples a replica needs before its estimate counts (default 8). */
  readonly minSamples: number;
  /** Half-life of an estimate's distance to the fleet median without new samples (default 10 s). */
  readonly staleHalfLifeMs: number;
  /** Relative distance to the median within which a replica counts as exactly median (default 0.5: within 1.5×). */
  readonly tolerance: number;
  /**
   * Absolute distance to the median (seconds) within which a replica counts as exactly median
   * (default 0.05): a few milliseconds per request are scheduling noise, not a slower replica.
   */
  readonly minDifference: number;
}

export const DEFAULT_SPEED_OPTIONS: SpeedEstimatorOptions = { window: 16, minSamples: 8, staleHalfLifeMs: 10_000, tolerance: 0.5, minDifference: 0.05 };

interface Estimate {
  readonly ring: Float64Array;
  samples: number;
  lastAt: number;
}

/** One replica's standing, as `factors` computes it. */
export interface SpeedFactor {
  /** Expected seconds in flight per request (decayed towards the median), or null before `minSamples` samples. */
  readonly seconds: number | null;
  /** `seconds` over the fleet median, 1 within the tolerance (and for a replica not yet measured). */
  readonly slowness: number;
}

/** Per-key speed estimates; keys are replicas in the router, anything in tests. */
export class SpeedEstimator<K> {
  private readonly byKey = new Map<K, Estimate>();
  readonly options: SpeedEstimatorOptions;

  constructor(
    private readonly clock: Clock,
    options: Partial<SpeedEstimatorOptions> = {},
  ) {
    this.options = { ...DEFAULT_SPEED_OPTIONS, ...options };
    const { window, minSamples, staleHalfLifeMs, tolerance, minDifference } = this.options;
    if (!(Number.isInteger(window) && window >= 1)) throw new RangeError(`SpeedEstimator: window must be an integer >= 1, got ${window}`);
    if (!(Number.isInteger(minSamples) && minSamples >= 1)) throw new RangeError(`SpeedEstimator: minSamples must be an integer >= 1, got ${minSamples}`);
    if (!(staleHalfLifeMs > 0)) throw new RangeError(`SpeedEstimator: staleHalfLifeMs must be > 0, got ${staleHalfLifeMs}`);
    if (!(tolerance >= 0)) throw new RangeError(`SpeedEstimator: tolerance must be >= 0, got ${tolerance}`);
    if (!(minDifference >= 0)) throw new RangeError(`SpeedEstimator: minDifference must be >= 0, got ${minDifference}`);
  }

  /** One request finished on `key` after `seconds` in flight (ignored unless finite and > 0). */
  observe(key: K, seconds: number): void {
    if (!(seconds > 0) || !Number.isFinite(seconds)) return;
    let e = this.byKey.get(key);
    if (e === undefined) {
      e = { ring: new Float64Array(this.options.window), samples: 0, lastAt: 0 };
      this.byKey.set(key, e);
    }
    e.ring[e.samples % e.ring.length] = seconds;
    e.samples++;
    e.lastAt = this.clock.now();
  }

  /** Drop what is known of `key` (the replica left the table). */
  forget(key: K): void {
    this.byKey.delete(key);
  }

  /** Samples seen for `key`. */
  samples(key: K): number {
    return this.byKey.get(key)?.samples ?? 0;
  }

  /**
   * Each key's decayed estimate and slowness relative to the median of the keys' (undecayed)
   * estimates; keys with fewer than `minSamples` samples count as that median. Same order as `keys`.
   */
  factors(keys: readonly K[]): SpeedFactor[] {
    const own = keys.map((k) => {
      const e = this.byKey.get(k);
      return e === undefined || e.samples < this.options.minSamples
        ? undefined
        : { at: e.lastAt, seconds: medianOf(e.ring.subarray(0, Math.min(e.samples, e.ring.length))) };
    });
    const known = own.filter((x) => x !== undefined).map((x) => x.seconds);
    if (known.length === 0) return keys.map(() => ({ seconds: null, slowness: 1 }));
    const median = medianOf(known);
    const now = this.clock.now();
    const { staleHalfLifeMs, tolerance, minDifference } = this.options;
    return own.map((x) => {
      if (x === undefined) return { seconds: null, slowness: 1 };
      const seconds = median + (x.seconds - median) * Math.pow(2, -Math.max(0, now - x.at) / staleHalfLifeMs);
      const ratio = seconds / median;
      const equal = Math.abs(seconds - median) <= minDifference || (ratio <= 1 + tolerance && ratio >= 1 / (1 + tolerance));
      return { seconds, slowness: equal ? 1 : ratio };
    });
  }
}

function medianOf(xs: ArrayLike<number>): number {
  const s = Float64Array.from(xs).sort();
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}
