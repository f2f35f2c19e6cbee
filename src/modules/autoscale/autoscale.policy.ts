/**
 * The autoscaling decision (contract §6.1) as a pure function: one pool's sample, the pool's track (the
 * timers and back-off carried from the last tick) and the clock go in; a decision and the next track
 * come out. No I/O: the autoscaler (autoscaler.service.ts) samples the pool and applies the decision.
 *
 * The signal is `desired = ceil(load / target_inflight)` within `[min, max]`, load being in-flight
 * plus queued requests on the pool's routable replicas. `desired > current` is exactly "above
 * `target_inflight` per replica"; `desired < current` is exactly "could have served with one
 * replica fewer at ≤ `target_inflight` each". A step is taken once the condition held at every
 * tick for `up_after` (`down_after`); the window restarts after each step, so every step needs a
 * full window of its own (hysteresis: load that flips faster than the window moves nothing).
 */
import type { AutoscaleSettings } from '../../config/router-config.js';

/** One pool at one tick, as the autoscaler saw it. */
export interface PoolSample {
  /** Members in rotation (ready, not draining): the replicas the signal divides over. */
  readonly routable: number;
  /** Members launched but never ready yet: capacity on the way (contract §6.1). */
  readonly starting: number;
  /** Members holding a slot and not on their way out: routable, starting, and unready ones. */
  readonly current: number;
  /** Members draining or stopping. */
  readonly leaving: number;
  /** In-flight + queued requests on the routable members. */
  readonly load: number;
  /** Launches the pool could make now: free slots on its hosts, under --max-replicas. */
  readonly freeSlots: number;
  /** A member scale-in may choose: ready, not starting, launched or adopted with a proven pid. */
  readonly removable: boolean;
}

/** What one pool carries from tick to tick. */
export interface PoolTrack {
  /** Clock time since which `desired > current` held at every tick (undefined: it does not). */
  readonly aboveSince: number | undefined;
  readonly belowSince: number | undefined;
  /** Autoscaler launches that failed in a row (reset by one that became ready). */
  readonly failures: number;
  /** No launch before this clock time (back-off after failures). */
  readonly retryAt: number | undefined;
}

export const NEW_TRACK: PoolTrack = { aboveSince: undefined, belowSince: undefined, failures: 0, retryAt: undefined };

export type Direction = 'up' | 'down' | 'hold';

export type Reason =
  /** up: fewer members than `min`. */
  | 'below_min'
  /** up: above `target_inflight` per replica for `up_after`. */
  | 'load_above_target'
  /** down: one replica fewer would have been at ≤ `target_inflight` each for `down_after`. */
  | 'load_below_target'
  /** down: more members than `max` (manual launches past it) for `down_after`. */
  | 'above_max'
  /** hold: desired = current. */
  | 'steady'
  /** hold: the condition holds but not yet for its whole window. */
  | 'waiting'
  /** hold: the load wants more than `max`, and the pool is there. */
  | 'at_max'
  /** hold: desired > current but no slot of the pool is free (or --max-replicas is reached). */
  | 'no_free_slot'
  /** hold: the last launches failed; the next is not before `retryAt`. */
  | 'backoff'
  /** hold: a scale-in is due but a member is still starting or leaving; decide once it settled. */
  | 'settling'
  /** hold: a scale-in is due but no member may be removed (starting, static, adopted without proof). */
  | 'no_candidate';

export interface Decision {
  readonly direction: Direction;
  readonly reason: Reason;
  readonly current: number;
  readonly desired: number;
  readonly load: number;
  /** load / routable (0 when none is routable). */
  readonly perReplica: number;
}

/** Back-off after `failures` failed launches in a row: the up window doubled per failure, at most 10 minutes. */
export function backoffMs(s: Pick<AutoscaleSettings, 'upAfterMs' | 'intervalMs'>, failures: number): number {
  const base = Math.max(s.upAfterMs, s.intervalMs);
  return Math.min(base * 2 ** Math.min(Math.max(0, failures - 1), 20), Math.max(base, 600_000));
}

/** The next track after a launch failed at `now`. */
export function afterLaunchFailure(t: PoolTrack, s: AutoscaleSettings, now: number): PoolTrack {
  const failures = t.failures + 1;
  return { ...t, failures, retryAt: now + backoffMs(s, failures) };
}

/** The next track after an autoscaler launch became ready. */
export function afterLaunchReady(t: PoolTrack): PoolTrack {
  return { ...t, failures: 0, retryAt: undefined };
}

/** Decide for one pool at clock time `now` (ms, any monotonic origin). */
export function decide(p: PoolSample, t: PoolTrack, s: AutoscaleSettings, now: number): { decision: Decision; track: PoolTrack } {
  const wanted = Math.ceil(p.load / s.targetInflight);
  const desired = Math.min(s.max, Math.max(s.min, wanted));
  const perReplica = p.routable > 0 ? p.load / p.routable : 0;
  const out = (direction: Direction, reason: Reason, track: PoolTrack, want = desired) => ({
    decision: { direction, reason, current: p.current, desired: want, load: p.load, perReplica },
    track,
  });

  if (desired > p.current) {
    const belowMin = p.current < s.min;
    const aboveSince = t.aboveSince ?? now;
    const track = { ...t, aboveSince, belowSince: undefined };
    if (!belowMin && now - aboveSince < s.upAfterMs) return out('hold', 'waiting', track);
    if (t.retryAt !== undefined && now < t.retryAt) return out('hold', 'backoff', track);
    if (p.freeSlots <= 0) return out('hold', 'no_free_slot', track);
    return out('up', belowMin ? 'below_min' : 'load_above_target', { ...track, aboveSince: now });
  }
  if (desired < p.current) {
    const belowSince = t.belowSince ?? now;
    const track = { ...t, aboveSince: undefined, belowSince };
    if (now - belowSince < s.downAfterMs) return out('hold', 'waiting', track);
    if (p.starting > 0 || p.leaving > 0) return out('hold', 'settling', track);
    if (!p.removable) return out('hold', 'no_candidate', track);
    return out('down', p.current > s.max ? 'above_max' : 'load_below_target', { ...track, belowSince: now });
  }
  const track = { ...t, aboveSince: undefined, belowSince: undefined };
  return out('hold', wanted > s.max && p.current >= s.max ? 'at_max' : 'steady', track);
}
