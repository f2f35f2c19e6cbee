/**
 * Closed-loop load (N connections, each sending its next request as soon as the previous answer
 * arrived): wrk with a Lua script when installed (it is far lighter than a Node generator on two
 * shared cores, and measures latency in microseconds), else autocannon (1 ms latency resolution).
 */
import { runAutocannon } from './autocannon-load.js';
import type { BenchContext } from './scenario.js';
import type { LoadResult, LoadSpec } from './load-spec.js';
import { runWrk } from './wrk.js';

export type { LoadResult, LoadSpec } from './load-spec.js';

/** Runs `spec` with wrk when available, else autocannon. */
export function runClosedLoop(ctx: BenchContext, spec: LoadSpec): Promise<LoadResult> {
  return ctx.tools.wrk !== null ? runWrk(ctx, ctx.tools.wrk, spec) : runAutocannon(spec);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length === 0 ? NaN : sorted.length % 2 === 1 ? (sorted[mid] ?? NaN) : ((sorted[mid - 1] ?? NaN) + (sorted[mid] ?? NaN)) / 2;
}

/**
 * Several runs of one target (rounds interleaved with other targets) as one result: counts and
 * durations add up, req/s = all requests ÷ all seconds, the mean is request-weighted, percentiles
 * are the median of the rounds' percentiles (the tools report percentiles, not raw samples).
 */
export function combineLoads(runs: readonly LoadResult[]): LoadResult {
  const first = runs[0];
  if (first === undefined) throw new Error('combineLoads needs at least one run');
  const requests = runs.reduce((a, r) => a + r.requests, 0);
  const durationS = runs.reduce((a, r) => a + r.durationS, 0);
  return {
    tool: first.tool,
    connections: first.connections,
    durationS,
    requests,
    rps: durationS > 0 ? requests / durationS : 0,
    meanMs: requests > 0 ? runs.reduce((a, r) => a + r.meanMs * r.requests, 0) / requests : NaN,
    p50Ms: median(runs.map((r) => r.p50Ms)),
    p90Ms: median(runs.map((r) => r.p90Ms)),
    p99Ms: median(runs.map((r) => r.p99Ms)),
    maxMs: Math.max(...runs.map((r) => r.maxMs)),
    errors: runs.reduce((a, r) => a + r.errors, 0),
    non2xx: runs.reduce((a, r) => a + r.non2xx, 0),
  };
}
