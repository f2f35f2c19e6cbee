/**
 * How fast each replica has been serving (SPEC §4.2), from the router's own timings: the seconds a
 * request spends in flight on it, from its body written upstream to the end of the answer. By
 * Little's law that is the reciprocal of completions per second per in-flight request, so it turns
 * an in-flight count into time: the expected wait of one more request is `(load + 1) × seconds`.
 * Why this signal rather than time to first byte or the gaps between chunks: docs/design.md §6.1.
 *
 * Stability rules:
 * - the estimate is an exponentially weighted mean (a running mean over the first samples);
 * - without new samples it decays towards the fleet median (half-life `staleHalfLifeMs`), so a
 *   replica that stopped receiving traffic because it was slow is tried again once it may have
 *   recovered, and a replica never measured (cold start) counts as the median — unless a request
 *   has already been in flight there for longer than the median (then at least that long);
 * - `slowness` is the estimate over the fleet median, snapped to exactly 1 within `tolerance` (or
 *   within `minDifference` seconds), so equally fast replicas compare by their in-flight counts
 *   alone, as without speed awareness.
 */
import type { Clock } from '../../common/clock.js';

export interface SpeedEstimatorOptions {
  /** Weight of a new sample once `1 / alpha` samples were seen (default 0.1). */
  readonly alpha: number;
  /** Half-life of an estimate's distance to the fleet median without new samples (default 10 s). */
  readonly staleHalfLifeMs: number;
  /** Relative distance to the median within which a replica counts as exactly median (default 0.3). */
  readonly tolerance: number;
  /**
   * Absolute distance to the median (seconds) within which a replica counts as exactly median
   * (default 0.05): a few milliseconds per request are scheduling noise, not a slower replica.
   */
  readonly minDifference: number;
}

export const DEFAULT_SPEED_OPTIONS: SpeedEstimatorOptions = { alpha: 0.1, staleHalfLifeMs: 10_000, tolerance: 0.3, minDifference: 0.05 };

interface Estimate {
  seconds: number;
  samples: number;
  lastAt: number;
}

/** One replica's standing, as `factors` computes it. */
export interface SpeedFactor {
  /** Expected seconds in flight per request (decayed towards the median), or null when nothing was ever measured. */
  readonly seconds: number | null;
  /** `seconds` over the fleet median, 1 within the tolerance (and for a replica never measured). */
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
    const { alpha, staleHalfLifeMs, tolerance, minDifference } = this.options;
    if (!(alpha > 0 && alpha <= 1)) throw new RangeError(`SpeedEstimator: alpha must be in (0, 1], got ${alpha}`);
    if (!(staleHalfLifeMs > 0)) throw new RangeError(`SpeedEstimator: staleHalfLifeMs must be > 0, got ${staleHalfLifeMs}`);
    if (!(tolerance >= 0)) throw new RangeError(`SpeedEstimator: tolerance must be >= 0, got ${tolerance}`);
    if (!(minDifference >= 0)) throw new RangeError(`SpeedEstimator: minDifference must be >= 0, got ${minDifference}`);
  }

  /** One request finished on `key` after `seconds` in flight (ignored unless finite and > 0). */
  observe(key: K, seconds: number): void {
    if (!(seconds > 0) || !Number.isFinite(seconds)) return;
    const now = this.clock.now();
    const e = this.byKey.get(key);
    if (e === undefined) {
      this.byKey.set(key, { seconds, samples: 1, lastAt: now });
      return;
    }
    e.samples++;
    const w = Math.max(this.options.alpha, 1 / e.samples);
    e.seconds += w * (seconds - e.seconds);
    e.lastAt = now;
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
   * estimates; keys never measured count as that median, or as `pendingSeconds[i]` (how long key
   * i's oldest request has been in flight) when that is longer. Same order as `keys`.
   */
  factors(keys: readonly K[], pendingSeconds?: readonly number[]): SpeedFactor[] {
    const known: number[] = [];
    for (const k of keys) {
      const e = this.byKey.get(k);
      if (e !== undefined) known.push(e.seconds);
    }
    if (known.length === 0) return keys.map(() => ({ seconds: null, slowness: 1 }));
    const median = medianOf(known);
    const now = this.clock.now();
    const { staleHalfLifeMs, tolerance, minDifference } = this.options;
    const snap = (seconds: number): number => {
      const ratio = seconds / median;
      return Math.abs(seconds - median) <= minDifference || (ratio <= 1 + tolerance && ratio >= 1 / (1 + tolerance)) ? 1 : ratio;
    };
    return keys.map((k, i) => {
      const e = this.byKey.get(k);
      if (e === undefined) {
        // Cold start: a request already in flight longer than the median is evidence of a slow replica.
        const pending = pendingSeconds?.[i] ?? 0;
        return pending > median ? { seconds: pending, slowness: snap(pending) } : { seconds: null, slowness: 1 };
      }
      const age = Math.max(0, now - e.lastAt);
      const seconds = median + (e.seconds - median) * Math.pow(2, -age / staleHalfLifeMs);
      return { seconds, slowness: snap(seconds) };
    });
  }
}

function medianOf(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}
