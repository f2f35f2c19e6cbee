/**
 * The router's own view of its overhead, from its Prometheus histogram
 * `affinity_router_overhead_seconds{phase="request"|"response"}` (contract §9): the sums and counts
 * are read before and after a run, and the mean per request is the difference.
 */
import { parseProm } from '../test/support/prom.js';
import { simRequest } from '../test/support/sim-process.js';

/** Sum (seconds) and count of each overhead phase at one moment. */
export type OverheadSnapshot = Record<string, { sum: number; count: number }>;

/** Reads `GET /metrics`; phases missing from the output are simply absent. */
export async function overheadSnapshot(routerUrl: string): Promise<OverheadSnapshot> {
  const res = await simRequest(`${routerUrl}/metrics`);
  if (res.status !== 200) throw new Error(`GET ${routerUrl}/metrics answered ${res.status}`);
  const out: OverheadSnapshot = {};
  for (const { name, labels, value } of parseProm(res.body.toString('utf8')).samples) {
    const kind = name === 'affinity_router_overhead_seconds_sum' ? 'sum' : name === 'affinity_router_overhead_seconds_count' ? 'count' : undefined;
    const phase = labels['phase'];
    if (kind === undefined || phase === undefined) continue;
    (out[phase] ??= { sum: 0, count: 0 })[kind] = value;
  }
  return out;
}

/** Mean milliseconds per exchange of each phase between two snapshots. */
export function overheadMeansMs(before: OverheadSnapshot, after: OverheadSnapshot): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [phase, a] of Object.entries(after)) {
    const b = before[phase] ?? { sum: 0, count: 0 };
    const n = a.count - b.count;
    if (n > 0) out[phase] = ((a.sum - b.sum) / n) * 1000;
  }
  return out;
}
