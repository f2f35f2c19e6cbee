/**
 * Scenario (e), row `affinity, 2 routers + Redis` (issue 8, acceptance 2): the single-router
 * affinity workload driven through two router processes that share their session pins through a
 * real `redis-server`, every conversation's turns alternating between them (turn k → router k % 2,
 * the worst case for affinity: no turn finds the pin its own router wrote last). Also: the routers
 * a row drives (one or two), their routing decisions from `/metrics`, and the target check.
 */
import { parseProm } from '../test/support/prom.js';
import { simRequest, type SimProcess } from '../test/support/sim-process.js';
import { startRouter, type BenchRouter } from './processes.js';
import type { BenchContext, TargetCheck } from './scenario.js';
import { countsText, fmt } from './stats.js';

/** The policy label of the two-router row. */
export const SHARED_ROW = 'affinity, 2 routers + Redis';

/** |2-router hit rate − single-router hit rate| allowed by the target (absolute). */
export const SHARED_TOLERANCE = 0.02;

/** The routers one row drives: base URLs (turn k goes to `urls[k % urls.length]`). */
export interface RouterSet {
  readonly urls: readonly string[];
  /** Routing decisions (`decision` or `decision;reason=...` → requests): summed over the routers, and each router's total. */
  decisions(): Promise<{ total: Record<string, number>; perRouter: number[] }>;
  /** Stops every router; resolves once all exited. */
  stop(): Promise<void>;
}

/** `affinity_router_requests_total` of one router by decision (+ reason), from `GET /metrics`. */
async function routerDecisions(url: string): Promise<Record<string, number>> {
  const res = await simRequest(`${url}/metrics`);
  if (res.status !== 200) throw new Error(`GET ${url}/metrics answered ${res.status}`);
  const out: Record<string, number> = {};
  for (const { name, labels, value } of parseProm(res.body.toString('utf8')).samples) {
    if (name !== 'affinity_router_requests_total') continue;
    const reason = labels['reason'] ?? '';
    const key = `${labels['decision'] ?? '?'}${reason === '' ? '' : `;reason=${reason}`}`;
    out[key] = (out[key] ?? 0) + value;
  }
  return out;
}

/** Wraps started routers as a {@link RouterSet}. */
export function routerSet(routers: readonly BenchRouter[]): RouterSet {
  return {
    urls: routers.map((r) => r.url),
    async decisions() {
      const total: Record<string, number> = {};
      const each = await Promise.all(routers.map((r) => routerDecisions(r.url)));
      for (const one of each) for (const [k, v] of Object.entries(one)) total[k] = (total[k] ?? 0) + v;
      return { total, perRouter: each.map((one) => Object.values(one).reduce((a, v) => a + v, 0)) };
    },
    async stop() {
      await Promise.all(routers.map((r) => r.stop()));
    },
  };
}

/** A started redis-server (the test helper's, loaded only when scenario e needs it). */
export interface BenchRedis {
  readonly url: string;
  stop(): Promise<void>;
}

/** Starts a throwaway redis-server on a free loopback port, or null when none is installed. */
export async function startBenchRedis(): Promise<BenchRedis | null> {
  // Imported lazily: the helper pulls in the router's test support (Nest), which the other scenarios do not need.
  const { startRedis } = await import('../test/support/redis.js');
  return startRedis();
}

/**
 * Two affinity routers with the same config, both `--redis-url <redis>`; each gets its own port, so
 * the default `--advertise-url` (http://<host>:<port>) already differs.
 */
export async function startSharedRouters(ctx: BenchContext, sims: readonly SimProcess[], redis: BenchRedis): Promise<RouterSet> {
  const flags = ['--routing-policy', 'affinity', '--redis-url', redis.url];
  const first = await startRouter(ctx, sims, flags);
  try {
    return routerSet([first, await startRouter(ctx, sims, flags)]);
  } catch (e: unknown) {
    await first.stop();
    throw e;
  }
}

/** Why the two-router row is missing: redis-server absent (`crashed: false`, skipped) or the row failed. */
export interface SharedMissing {
  readonly reason: string;
  readonly crashed: boolean;
}

/** Target (8): the 2-router hit rate within {@link SHARED_TOLERANCE} of the single-router one (a crashed row fails it). */
export function sharedTarget(single: number | undefined, shared: number | undefined, missing: SharedMissing | null): TargetCheck {
  const target = `(8) 2-router hit rate equal to single-router affinity (|Δ| ≤ ${SHARED_TOLERANCE} absolute)`;
  if (single === undefined || shared === undefined)
    return { target, measured: missing?.reason ?? 'not measured', pass: missing?.crashed === true ? false : null };
  const delta = shared - single;
  const ratio = single === 0 ? NaN : shared / single;
  return {
    target,
    measured: `${fmt(shared, 3)} vs ${fmt(single, 3)} (Δ ${delta >= 0 ? '+' : ''}${fmt(delta, 3)}, ratio ${fmt(ratio, 3)})`,
    pass: Math.abs(delta) <= SHARED_TOLERANCE,
  };
}

/** The note under the table describing the two-router row (or why it was skipped). */
export function sharedNote(
  missing: SharedMissing | null,
  decisions: Record<string, number> | undefined,
  perRouter: readonly number[] | undefined,
  sessions: number,
): string {
  if (missing !== null) return `Row "${SHARED_ROW}" ${missing.crashed ? 'failed' : 'skipped'}: ${missing.reason}.`;
  const seen = countsText(decisions ?? {});
  return (
    `Row "${SHARED_ROW}" (issue 8): a real redis-server, fresh simulators, and two router processes with the same config and \`--routing-policy affinity --redis-url\`; the same workload (same seed) ` +
    `with turn k of every conversation sent to router k % 2 — the worst case for affinity, since every turn arrives at the router that did not route the previous one and must find the pin in Redis. ` +
    `Requests per router: ${perRouter?.join(' / ') ?? 'n/a'}; routing decisions over both: ${seen === '' ? 'n/a' : seen} (${decisions?.['initialize'] ?? 0} initialize for ${sessions} sessions: more would mean a router missed a pin in Redis). ` +
    `The hit rate depends on whether each turn reaches the replica holding its session's history, not on which replica that is, so with no turn moved it matches the single-router row almost to the token. ` +
    `TTFT is noise-prone on 2 shared cores: judge the hit rate. "sessions on >1 replica" counts conversations the simulators saw (by x-session-id) on more than one replica.`
  );
}
