/**
 * The autocannon fallback of {@link runClosedLoop} (used when `wrk` is not installed).
 * autocannon keeps latencies in an integer-millisecond histogram: sub-millisecond differences
 * are invisible with it (the report says so).
 */
import autocannon from 'autocannon';
import type { LoadResult, LoadSpec } from './load-spec.js';

/** Runs `spec` with autocannon in this process. */
export async function runAutocannon(spec: LoadSpec): Promise<LoadResult> {
  const result = await autocannon({
    url: spec.url,
    connections: spec.connections,
    duration: spec.durationS,
    timeout: 30,
    requests: spec.bodies.map((body) => ({ method: 'POST', path: spec.path, headers: { 'content-type': 'application/json', ...spec.headers }, body })),
  });
  const total = result['2xx'] + result.non2xx;
  return {
    tool: 'autocannon',
    connections: spec.connections,
    durationS: result.duration,
    requests: total,
    rps: total / result.duration,
    meanMs: result.latency.mean,
    p50Ms: result.latency.p50,
    p90Ms: result.latency.p90,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    errors: result.errors,
    non2xx: result.non2xx,
  };
}
