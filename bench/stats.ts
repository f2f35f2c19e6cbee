/**
 * Small statistics helpers for the bench: percentiles over raw samples, summaries, rounding and a
 * seeded PRNG so that workloads are identical between runs and policies.
 */

/** Summary of a sample set (same unit as the samples). */
export interface Summary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** The `q`-quantile (0..1) of ascending-sorted `sorted`, nearest-rank; NaN when empty. */
export function quantileSorted(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] ?? NaN;
}

/** Count, mean, p50, p90, p99 and max of `samples` (NaN fields when empty). */
export function summarize(samples: readonly number[]): Summary {
  const sorted = Float64Array.from(samples).sort();
  const arr = Array.from(sorted);
  let sum = 0;
  for (const v of arr) sum += v;
  return {
    count: arr.length,
    mean: arr.length === 0 ? NaN : sum / arr.length,
    p50: quantileSorted(arr, 0.5),
    p90: quantileSorted(arr, 0.9),
    p99: quantileSorted(arr, 0.99),
    max: arr.length === 0 ? NaN : (arr[arr.length - 1] ?? NaN),
  };
}

/** Rounds to `digits` decimals (keeps JSON results readable). */
export function round(v: number, digits = 3): number {
  if (!Number.isFinite(v)) return v;
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}

/** Rounds every number of a summary. */
export function roundSummary(s: Summary, digits = 3): Summary {
  return {
    count: s.count,
    mean: round(s.mean, digits),
    p50: round(s.p50, digits),
    p90: round(s.p90, digits),
    p99: round(s.p99, digits),
    max: round(s.max, digits),
  };
}

/** Formats a number for a table cell: `—` for NaN/undefined, else fixed decimals. */
export function fmt(v: number | undefined | null, digits = 2): string {
  if (v === undefined || v === null || !Number.isFinite(v)) return '—';
  return v.toFixed(digits);
}

/** Formats a signed difference (`+0.12`, `-0.05`). */
export function fmtDelta(v: number | undefined, digits = 2): string {
  if (v === undefined || !Number.isFinite(v)) return '—';
  return `${v >= 0 ? '+' : ''}${v.toFixed(digits)}`;
}

/** mulberry32: a tiny seeded PRNG returning floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An exponentially distributed sample with the given mean (Poisson inter-arrival times). */
export function exponential(random: () => number, mean: number): number {
  return -Math.log(1 - random()) * mean;
}

/** Counts per replica as `v0:12 v1:9` (in the record's order). */
export function perReplicaText(counts: Readonly<Record<string, number>>): string {
  return Object.entries(counts)
    .map(([k, v]) => `${k}:${v}`)
    .join(' ');
}

/** Counts by kind as `retain 840, initialize 120`, largest first. */
export function countsText(counts: Readonly<Record<string, number>>): string {
  return Object.entries(counts)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
}
