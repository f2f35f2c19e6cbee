import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AutoscaleSettings } from '../../config/router-config.js';
import { afterLaunchFailure, afterLaunchReady, backoffMs, decide, NEW_TRACK, type Decision, type PoolSample, type PoolTrack } from './autoscale.policy.js';

const S: AutoscaleSettings = { min: 1, max: 3, targetInflight: 2, intervalMs: 1_000, upAfterMs: 5_000, downAfterMs: 10_000 };

/** A settled pool of `n` ready replicas carrying `load`, with `free` slots left. */
const pool = (n: number, load: number, more: Partial<PoolSample> = {}): PoolSample => ({
  routable: n,
  starting: 0,
  current: n,
  leaving: 0,
  load,
  freeSlots: 3 - n,
  removable: n > 0,
  ...more,
});

/**
 * A tiny simulation: the pool follows every up/down decision at once (launch = ready at once,
 * removal = gone at once), ticking every `S.intervalMs` over `loads` (one load per tick).
 */
function simulate(loads: readonly number[], settings = S, start = 1): { sizes: number[]; steps: Decision[] } {
  let size = start;
  let track: PoolTrack = NEW_TRACK;
  const sizes: number[] = [];
  const steps: Decision[] = [];
  loads.forEach((load, i) => {
    const r = decide(pool(size, load), track, settings, i * settings.intervalMs);
    track = r.track;
    if (r.decision.direction === 'up') size++;
    if (r.decision.direction === 'down') size--;
    if (r.decision.direction !== 'hold') steps.push(r.decision);
    sizes.push(size);
  });
  return { sizes, steps };
}

const repeat = (load: number, ticks: number): number[] => Array.from({ length: ticks }, () => load);

describe('autoscale policy (contract §6.1)', () => {
  it('scales up by one only after the load stayed above target_inflight per replica for up_after', () => {
    let t = NEW_TRACK;
    for (const now of [0, 1_000, 4_000]) {
      const r = decide(pool(1, 6), t, S, now);
      assert.deepEqual([r.decision.direction, r.decision.reason, r.decision.desired], ['hold', 'waiting', 3], `at ${now}`);
      t = r.track;
    }
    const up = decide(pool(1, 6), t, S, 5_000);
    assert.deepEqual([up.decision.direction, up.decision.reason, up.decision.perReplica], ['up', 'load_above_target', 6]);
    // The window restarts after a step: the next one needs a whole up_after of its own.
    assert.equal(decide(pool(2, 6), up.track, S, 9_000).decision.direction, 'hold');
    assert.equal(decide(pool(2, 6), up.track, S, 10_000).decision.direction, 'up');
  });

  it('grows to max under sustained load and shrinks back to min after it ends', () => {
    const { sizes, steps } = simulate([...repeat(6, 30), ...repeat(0, 60)]);
    assert.equal(Math.max(...sizes), 3);
    assert.equal(sizes[29], 3, 'at max while the load lasted');
    assert.equal(sizes.at(-1), 1, 'back at min');
    assert.deepEqual(
      steps.map((d) => `${d.direction}:${d.reason}`),
      ['up:load_above_target', 'up:load_above_target', 'down:load_below_target', 'down:load_below_target'],
    );
  });

  it('does not oscillate under load that flips faster than its windows', () => {
    // 3 s at 6 requests, 3 s at none, for two minutes: neither window (5 s up, 10 s down) ever completes.
    const flips = Array.from({ length: 20 }, () => [...repeat(6, 3), ...repeat(0, 3)]).flat();
    assert.deepEqual(simulate(flips, S, 1).steps, []);
    assert.deepEqual(simulate(flips, S, 2).steps, []);
  });

  it('changes size at most once per window even when the load flips around a boundary', () => {
    // Load alternating 4 and 5 on two replicas (desired 2 and 3) every tick: the up window never completes.
    const { steps } = simulate(
      Array.from({ length: 100 }, (_, i) => (i % 2 === 0 ? 4 : 5)),
      S,
      2,
    );
    assert.deepEqual(steps, []);
  });

  it('an idle pool never goes below min, and it goes up to min at once', () => {
    const { sizes } = simulate(repeat(0, 100), { ...S, min: 2 }, 2);
    assert.ok(sizes.every((n) => n === 2));
    const r = decide(pool(0, 0, { freeSlots: 3 }), NEW_TRACK, { ...S, min: 2 }, 0);
    assert.deepEqual([r.decision.direction, r.decision.reason], ['up', 'below_min']);
  });

  it('never goes above max, and holds at_max when the load wants more', () => {
    const { sizes } = simulate(repeat(100, 200));
    assert.equal(Math.max(...sizes), 3);
    assert.equal(decide(pool(3, 100, { freeSlots: 5 }), NEW_TRACK, S, 0).decision.reason, 'at_max');
  });

  it('never launches without a free slot', () => {
    const t = decide(pool(1, 6, { freeSlots: 0 }), NEW_TRACK, S, 0).track;
    const r = decide(pool(1, 6, { freeSlots: 0 }), t, S, 60_000);
    assert.deepEqual([r.decision.direction, r.decision.reason, r.decision.desired], ['hold', 'no_free_slot', 3]);
  });

  it('counts a starting replica as capacity on the way: no second launch while it loads', () => {
    // 5 requests on 2 replicas (2.5 each) → one launch; with it starting, 5 over 3 is within target.
    const t = decide(pool(2, 5), NEW_TRACK, S, 0).track;
    assert.equal(decide(pool(2, 5), t, S, 5_000).decision.direction, 'up');
    const starting = pool(2, 5, { starting: 1, current: 3, freeSlots: 0 });
    for (const now of [6_000, 20_000, 60_000]) assert.equal(decide(starting, t, S, now).decision.direction, 'hold');
  });

  it('never removes while a member is starting or leaving, nor when no member may be removed', () => {
    const t = decide(pool(3, 0), NEW_TRACK, S, 0).track;
    assert.equal(decide(pool(2, 0, { starting: 1, current: 3 }), t, S, 10_000).decision.reason, 'settling');
    assert.equal(decide(pool(3, 0, { leaving: 1 }), t, S, 10_000).decision.reason, 'settling');
    assert.equal(decide(pool(3, 0, { removable: false }), t, S, 10_000).decision.reason, 'no_candidate');
    assert.equal(decide(pool(3, 0), t, S, 10_000).decision.direction, 'down');
  });

  it('removes manual launches past max after down_after', () => {
    const t = decide(pool(4, 100, { freeSlots: 0 }), NEW_TRACK, S, 0).track;
    const r = decide(pool(4, 100, { freeSlots: 0 }), t, S, 10_000);
    assert.deepEqual([r.decision.direction, r.decision.reason, r.decision.desired], ['down', 'above_max', 3]);
  });

  it('backs off after failed launches, doubling the wait, and forgets it after a launch that became ready', () => {
    assert.deepEqual(
      [1, 2, 3, 4].map((n) => backoffMs(S, n)),
      [5_000, 10_000, 20_000, 40_000],
    );
    assert.equal(backoffMs(S, 100), 600_000, 'at most 10 minutes');
    let t = decide(pool(1, 6), NEW_TRACK, S, 0).track;
    t = decide(pool(1, 6), t, S, 5_000).track; // launched...
    t = afterLaunchFailure(t, S, 6_000); // ...and it failed: no launch before 11 s
    const during = [10_000, 10_999].map((now) => decide(pool(1, 6), t, S, now).decision.reason);
    assert.deepEqual(during, ['backoff', 'backoff']);
    assert.equal(decide(pool(1, 6), t, S, 11_000).decision.direction, 'up');
    t = afterLaunchFailure(t, S, 12_000); // second failure: 10 s
    assert.equal(decide(pool(1, 6), t, S, 21_999).decision.reason, 'backoff');
    assert.equal(decide(pool(1, 6), t, S, 22_000).decision.direction, 'up');
    assert.deepEqual(afterLaunchReady(t), { ...t, failures: 0, retryAt: undefined });
  });

  it('a launch failure never stops scale-in, nor a below-min relaunch once the back-off ended', () => {
    const t = afterLaunchFailure(NEW_TRACK, S, 0);
    const r = decide(pool(0, 0, { freeSlots: 3 }), t, S, 1_000);
    assert.deepEqual([r.decision.direction, r.decision.reason], ['hold', 'backoff']);
    assert.equal(decide(pool(0, 0, { freeSlots: 3 }), t, S, 5_000).decision.reason, 'below_min');
  });
});
