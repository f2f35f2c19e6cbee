import type { Histogram, LabelValues } from 'prom-client';

/** One series of a prom-client histogram as prom-client 15 stores it (lib/histogram.js, createBaseValues). */
interface SeriesValues {
  labels: LabelValues<string>;
  sum: number;
  count: number;
  /** Keyed by each upper bound as a property name (String(bound)). */
  bucketValues: Record<string, number>;
}

/** The parts of a prom-client 15 Histogram that hold its series. */
interface HistogramStore {
  hashMap: Record<string, SeriesValues | undefined>;
  readonly upperBounds: readonly number[];
}

/** Something observed once per request or per chunk. */
export interface Observer {
  observe(value: number): void;
}

/**
 * One series of `histogram` for the data path. prom-client's own `observe`, a bound child's
 * included, checks the label names and builds the label set's hash string on every call (about a
 * microsecond each, several times per request and once per relayed chunk, bench/RESULTS.md). This
 * lets prom-client create the series at its first observation, then adds to it as prom-client does:
 * the sum, the count, and the first bucket whose upper bound holds the value (cumulative counts are
 * made at export, as before). The exposition is prom-client's own, byte for byte
 * (histogram-series.spec.ts compares the two). A value that is not finite goes to prom-client,
 * which refuses it as it always did.
 */
export function histogramSeries<L extends string>(histogram: Histogram<L>, labels: LabelValues<L>): Observer {
  const store = histogram as unknown as HistogramStore;
  const bounds = store.upperBounds;
  // The bucket keys as the store holds them (property names): made once, not per observation.
  const names = bounds.map(String);
  let key: string | undefined;
  let series: SeriesValues | undefined;
  return {
    observe(value: number): void {
      if (series === undefined || store.hashMap[key!] !== series || !Number.isFinite(value)) {
        histogram.observe(labels, value);
        [key, series] = find(store, labels);
        return;
      }
      series.sum += value;
      series.count += 1;
      const buckets = series.bucketValues;
      for (let i = 0; i < bounds.length; i++) {
        if (value <= bounds[i]) {
          buckets[names[i]] += 1;
          return;
        }
      }
    },
  };
}

/** The stored series whose labels are `labels` (found once per series). */
function find(store: HistogramStore, labels: LabelValues<string>): [string | undefined, SeriesValues | undefined] {
  const names = Object.keys(labels);
  for (const [k, s] of Object.entries(store.hashMap)) {
    if (s === undefined) continue;
    const theirs = Object.keys(s.labels);
    if (theirs.length === names.length && names.every((n) => String(s.labels[n]) === String(labels[n]))) return [k, s];
  }
  return [undefined, undefined];
}
