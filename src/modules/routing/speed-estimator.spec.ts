import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ManualClock } from '../../common/clock.fake.js';
import { SpeedEstimator } from './speed-estimator.js';

const slowness = (e: SpeedEstimator<string>, keys: string[]): number[] => e.factors(keys).map((f) => f.slowness);

/** `n` samples for each key at its own seconds, interleaved, `gapMs` apart. */
function feed(e: SpeedEstimator<string>, clock: ManualClock, seconds: Record<string, number>, n: number, gapMs = 10): void {
  for (let i = 0; i < n; i++) {
    for (const [k, s] of Object.entries(seconds)) e.observe(k, s);
    clock.advance(gapMs);
  }
}

describe('speed estimator (contract §4.2)', () => {
  it('cold start: a replica with fewer than minSamples samples counts as the fleet median (slowness 1, no estimate)', () => {
    const clock = new ManualClock();
    const e = new SpeedEstimator<string>(clock);
    assert.deepEqual(e.factors(['a', 'b']), [
      { seconds: null, slowness: 1 },
      { seconds: null, slowness: 1 },
    ]);
    feed(e, clock, { a: 0.2, b: 0.8, c: 0.2 }, 20, 0);
    feed(e, clock, { d: 5 }, 7, 0);
    const f = e.factors(['a', 'b', 'c', 'd', 'new']);
    assert.deepEqual(f[1], { seconds: 0.8, slowness: 4 });
    assert.deepEqual(f.slice(3), [
      { seconds: null, slowness: 1 },
      { seconds: null, slowness: 1 },
    ]);
  });

  it('a replica 4x slower than the others gets slowness 4; the others exactly 1', () => {
    const clock = new ManualClock();
    const e = new SpeedEstimator<string>(clock);
    feed(e, clock, { r0: 0.25, r1: 0.25, r2: 1 }, 50);
    const [a, b, c] = slowness(e, ['r0', 'r1', 'r2']);
    assert.deepEqual([a, b], [1, 1]);
    assert.ok(Math.abs(c - 4) < 0.01, String(c));
  });

  it('one long answer or one stall among short ones does not move the estimate (median of the window)', () => {
    const clock = new ManualClock();
    const e = new SpeedEstimator<string>(clock);
    feed(e, clock, { r0: 0.1, r1: 0.1, r2: 0.1 }, 20, 0);
    for (let i = 0; i < 5; i++) e.observe('r2', 10);
    assert.deepEqual(slowness(e, ['r0', 'r1', 'r2']), [1, 1, 1]);
  });

  it('property: replicas equally fast up to noise within the tolerance compare exactly equal (slowness 1), whatever the sample order', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(2), fc.double({ min: 1, max: 1.45, noNaN: true })), { minLength: 1, maxLength: 300 }),
        fc.double({ min: 0.001, max: 100, noNaN: true }),
        (samples, base) => {
          const clock = new ManualClock();
          const e = new SpeedEstimator<string>(clock);
          for (const [k, x] of samples) {
            e.observe(`r${k}`, base * x);
            clock.advance(5);
          }
          assert.deepEqual(slowness(e, ['r0', 'r1', 'r2']), [1, 1, 1]);
        },
      ),
    );
  });

  it('no starvation: without new samples a slow estimate decays back to the median (half-life), then counts as equal', () => {
    const clock = new ManualClock();
    const e = new SpeedEstimator<string>(clock, { staleHalfLifeMs: 10_000 });
    feed(e, clock, { r0: 0.25, r1: 0.25, r2: 1 }, 50);
    assert.ok(slowness(e, ['r0', 'r1', 'r2'])[2] > 3.9);
    // r2 gets nothing more; the others keep serving.
    feed(e, clock, { r0: 0.25, r1: 0.25 }, 1000, 10);
    const s10 = e.factors(['r0', 'r1', 'r2'])[2];
    assert.ok(s10.slowness > 2.3 && s10.slowness < 2.6, `after one half-life: ${s10.slowness}`);
    feed(e, clock, { r0: 0.25, r1: 0.25 }, 3000, 10);
    assert.deepEqual(slowness(e, ['r0', 'r1', 'r2']), [1, 1, 1]);
  });

  it('a replica that recovers is recognised from its new samples', () => {
    const clock = new ManualClock();
    const e = new SpeedEstimator<string>(clock);
    feed(e, clock, { r0: 0.25, r1: 0.25, r2: 1 }, 50);
    feed(e, clock, { r0: 0.25, r1: 0.25, r2: 0.25 }, 16);
    assert.deepEqual(slowness(e, ['r0', 'r1', 'r2']), [1, 1, 1]);
  });

  it('a few milliseconds per request are noise: 10 ms against 30 ms counts as equal, 100 ms against 400 ms does not', () => {
    const clock = new ManualClock();
    const e = new SpeedEstimator<string>(clock);
    feed(e, clock, { r0: 0.01, r1: 0.01, r2: 0.03 }, 20, 0);
    assert.deepEqual(slowness(e, ['r0', 'r1', 'r2']), [1, 1, 1]);
    feed(e, clock, { a: 0.1, b: 0.1, c: 0.4 }, 20, 0);
    assert.deepEqual(slowness(e, ['a', 'b', 'c']), [1, 1, 4]);
  });

  it('ignores samples that are not finite and positive, and forgets a key', () => {
    const clock = new ManualClock();
    const e = new SpeedEstimator<string>(clock, { minSamples: 1 });
    for (const bad of [0, -1, NaN, Infinity]) e.observe('a', bad);
    assert.equal(e.samples('a'), 0);
    e.observe('a', 1);
    assert.deepEqual(e.factors(['a']), [{ seconds: 1, slowness: 1 }]);
    e.forget('a');
    assert.deepEqual(e.factors(['a']), [{ seconds: null, slowness: 1 }]);
  });

  it('refuses options out of range, naming them', () => {
    const clock = new ManualClock();
    assert.throws(() => new SpeedEstimator(clock, { window: 0 }), /window must be an integer >= 1, got 0/);
    assert.throws(() => new SpeedEstimator(clock, { minSamples: 1.5 }), /minSamples must be an integer >= 1/);
    assert.throws(() => new SpeedEstimator(clock, { staleHalfLifeMs: 0 }), /staleHalfLifeMs must be > 0/);
    assert.throws(() => new SpeedEstimator(clock, { tolerance: -0.1 }), /tolerance must be >= 0/);
    assert.throws(() => new SpeedEstimator(clock, { minDifference: -1 }), /minDifference must be >= 0/);
  });
});
