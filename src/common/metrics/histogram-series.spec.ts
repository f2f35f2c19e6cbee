import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Histogram, Registry } from 'prom-client';
import { histogramSeries } from './histogram-series.js';

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];
/** On a bound, between bounds, under the first, over the last, zero. */
const VALUES = [0, 0.0005, 0.001, 0.002, 0.01, 0.05, 0.1, 0.99, 1, 3, 10, 10.5, 250];

function pair(labelNames: string[]): { reg: Registry; h: Histogram<string> }[] {
  return [0, 1].map(() => {
    const reg = new Registry();
    const h = new Histogram({ name: 'x_seconds', help: 'h', labelNames, buckets: BUCKETS, registers: [reg] });
    return { reg, h };
  });
}

describe('histogramSeries', () => {
  it("exports exactly what prom-client's own observe exports, with labels", async () => {
    const [plain, fast] = pair(['route']);
    const routes = { a: histogramSeries(fast.h, { route: 'a' }), b: histogramSeries(fast.h, { route: 'b' }) };
    for (const v of VALUES) {
      plain.h.observe({ route: 'a' }, v);
      routes.a.observe(v);
      plain.h.observe({ route: 'b' }, v * 2);
      routes.b.observe(v * 2);
    }
    assert.equal(await fast.reg.metrics(), await plain.reg.metrics());
    assert.deepEqual(await fast.reg.getMetricsAsJSON(), await plain.reg.getMetricsAsJSON());
  });

  it('without labels, and again after the histogram was reset', async () => {
    const [plain, fast] = pair([]);
    const s = histogramSeries(fast.h, {});
    for (const v of VALUES) {
      plain.h.observe(v);
      s.observe(v);
    }
    assert.equal(await fast.reg.metrics(), await plain.reg.metrics());
    plain.h.reset();
    fast.h.reset();
    for (const v of VALUES.slice(3)) {
      plain.h.observe(v);
      s.observe(v);
    }
    assert.equal(await fast.reg.metrics(), await plain.reg.metrics());
    assert.match(await fast.reg.metrics(), /x_seconds_count 10\n/);
  });

  it('refuses a value that is not finite, as prom-client does', () => {
    const [, fast] = pair([]);
    const s = histogramSeries(fast.h, {});
    s.observe(1);
    assert.throws(() => s.observe(Number.NaN), /not a valid number/);
  });
});
