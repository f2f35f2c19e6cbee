import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { interTokenGap } from './sim-exchange.js';

describe('interTokenGap', () => {
  it('is exactly --itl-ms without jitter, whatever the random source says', () => {
    assert.equal(
      interTokenGap({ itlMs: 30, itlJitterMs: 0 }, () => 0.99),
      30,
    );
  });

  it('spans --itl-ms ± jitter uniformly: the ends of the random range map to the ends of the gap range', () => {
    const timing = { itlMs: 30, itlJitterMs: 10 };
    assert.equal(
      interTokenGap(timing, () => 0),
      20,
    );
    assert.equal(
      interTokenGap(timing, () => 0.5),
      30,
    );
    assert.ok(Math.abs(interTokenGap(timing, () => 0.999_999) - 40) < 1e-3);
  });

  it('stays within the range with the real random source, and varies', () => {
    const gaps = Array.from({ length: 1_000 }, () => interTokenGap({ itlMs: 30, itlJitterMs: 10 }));
    assert.ok(
      gaps.every((g) => g >= 20 && g < 40),
      'every gap in [20, 40)',
    );
    assert.ok(new Set(gaps).size > 100, 'gaps are drawn, not fixed');
    const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
    assert.ok(mean > 28 && mean < 32, `mean ${mean} stays near --itl-ms`);
  });

  it('never goes below 0 when the jitter equals --itl-ms', () => {
    assert.equal(
      interTokenGap({ itlMs: 5, itlJitterMs: 5 }, () => 0),
      0,
    );
  });
});
