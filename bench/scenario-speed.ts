/**
 * Scenario (v), issue 15 row (c): one replica 4x slower. Three KV-cache simulators as in scenario
 * (e), the third with `--slowdown 4`; the multi-turn chat workload of scenario (e) (session ids in
 * the body, same seed) sent as streams, once through a router with `routing.speed_aware: false`
 * (today's policy: least in-flight + slack 8) and once with speed-aware load (contract §4.2), each on
 * fresh simulators. Client time to first token, the simulators' hit rate against the oracle (one
 * infinite KV cache fed every prompt in send order), and where requests went.
 */
import type { SimProcess } from '../test/support/sim-process.js';
import { defaultChatWorkload, type ChatWorkloadSpec } from './chat-workload.js';
import { startRouter, startSims, stopSims } from './processes.js';
import { ROUTING_SIM_ARGS } from './scenario-routing.js';
import type { BenchContext, Scenario, ScenarioResult } from './scenario.js';
import { oracleHitRate } from './prefix-workload.js';
import { driveStreams } from './speed-drive.js';
import { countsText, fmt, perReplicaText, round, roundSummary, summarize, type Summary } from './stats.js';
import { simCacheTotals } from './sim-cache-totals.js';

const SLOWDOWN = 4;
const BLOCK = 16;
/** Speed share of the slow replica: 1/4 against two replicas at 1. */
const SPEED_SHARE = 1 / SLOWDOWN / (2 + 1 / SLOWDOWN);

interface SpeedRow {
  row: string;
  sent: number;
  ok: number;
  failed: number;
  ttft: Summary;
  /** Over client requests; warm hand-off copies are in `warm`. */
  hitRate: number;
  oracle: number;
  /** Warm hand-off copies the simulators saw, and the hit rate over every prefill, copies included. */
  warm: { requests: number; promptTokens: number; hitRateAll: number };
  simTtftP99Ms: number;
  perReplica: Record<string, number>;
  slowShare: number;
  decisions: Record<string, number>;
  /** Client TTFT by replica and first/later turn. */
  ttftBy: Record<string, Summary>;
}

/** The simulators' `--max-running`: what an operator declares as each replica's `max_inflight`. */
const BATCH = Number(ROUTING_SIM_ARGS[ROUTING_SIM_ARGS.indexOf('--max-running') + 1]);
const withBatch = (sims: readonly SimProcess[]): Record<string, unknown> => ({
  replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port, max_inflight: BATCH })),
});

/** The first row is the baseline every other row is judged against (issue 15 row c). */
const ROWS: ReadonlyArray<{ row: string; config: (sims: readonly SimProcess[]) => Record<string, unknown> }> = [
  { row: 'baseline: in-flight counts', config: () => ({ routing: { speed_aware: false } }) },
  { row: 'speed-aware', config: () => ({}) },
  { row: `baseline + max_inflight ${BATCH}`, config: (sims) => ({ ...withBatch(sims), routing: { speed_aware: false } }) },
  { row: `speed-aware + max_inflight ${BATCH}`, config: withBatch },
  { row: `speed-aware + max_inflight ${BATCH} + warm hand-off`, config: (sims) => ({ ...withBatch(sims), routing: { warm_handoff: true } }) },
];

async function runRow(
  ctx: BenchContext,
  row: string,
  config: (sims: readonly SimProcess[]) => Record<string, unknown>,
  spec: ChatWorkloadSpec,
): Promise<SpeedRow> {
  const fast = await startSims(2, ROUTING_SIM_ARGS, 'v');
  let sims: SimProcess[] = fast;
  try {
    const [slow] = await startSims(1, [...ROUTING_SIM_ARGS, '--slowdown', String(SLOWDOWN)], 'v-slow');
    sims = [...fast, slow];
    const router = await startRouter(ctx, sims, [], [], config(sims));
    let driven: Awaited<ReturnType<typeof driveStreams>>;
    try {
      ctx.log(`v: ${row}: ${spec.durationS}s of multi-turn chat at ${spec.rate} req/s (Poisson, streamed), ${slow.name} ${SLOWDOWN}x slower`);
      driven = await driveStreams(router.url, spec);
    } finally {
      await router.stop();
    }
    const stats = await Promise.all(sims.map((s) => s.stats()));
    const total = Object.values(driven.perReplica).reduce((a, b) => a + b, 0);
    const cache = simCacheTotals(stats);
    return {
      row,
      sent: driven.sent,
      ok: driven.ok,
      failed: driven.failed,
      ttft: summarize(driven.ttfts),
      hitRate: cache.hitRate,
      warm: { requests: cache.warm.requests, promptTokens: cache.warm.promptTokens, hitRateAll: cache.hitRateAll },
      oracle: oracleHitRate(driven.bodies, BLOCK),
      simTtftP99Ms: cache.ttftP99Ms,
      perReplica: Object.fromEntries(stats.map((s) => [s.name, s.requests])),
      slowShare: total === 0 ? NaN : (driven.perReplica[slow.name] ?? 0) / total,
      decisions: driven.decisions,
      ttftBy: Object.fromEntries(Object.entries(driven.ttftsBy).map(([k, v]) => [k, roundSummary(summarize(v))])),
    };
  } finally {
    await stopSims(sims);
  }
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const { plan } = ctx.options;
  const spec = defaultChatWorkload(plan.routingRate, plan.routingS);
  const rows: SpeedRow[] = [];
  for (const r of ROWS) rows.push(await runRow(ctx, r.row, r.config, spec));
  const base = rows[0];
  const judged = rows.filter((r) => r !== base && r.row.startsWith('speed-aware'));
  return {
    id: 'v-speed',
    title: 'Speed-aware load: one replica 4x slower (issue 15 row c)',
    tables: [
      {
        title: `(v) Multi-turn chat, ${spec.rate} req/s offered, 3 KV-cache simulators, one ${SLOWDOWN}x slower`,
        columns: [
          'policy',
          'sent',
          'ok',
          'failed',
          'TTFT mean ms',
          'TTFT p50 ms',
          'TTFT p99 ms',
          'hit rate',
          'oracle',
          'of oracle',
          'warm copies (prompt tokens)',
          'hit rate, copies included',
          'sim TTFT p99 ms',
          'requests per replica',
          'slow share',
          'decisions',
        ],
        rows: rows.map((r) => [
          r.row,
          String(r.sent),
          String(r.ok),
          String(r.failed),
          fmt(r.ttft.mean, 1),
          fmt(r.ttft.p50, 1),
          fmt(r.ttft.p99, 1),
          fmt(r.hitRate, 3),
          fmt(r.oracle, 3),
          `${fmt((r.hitRate / r.oracle) * 100, 1)}%`,
          `${r.warm.requests} (${r.warm.promptTokens})`,
          fmt(r.warm.hitRateAll, 3),
          fmt(r.simTtftP99Ms, 1),
          perReplicaText(r.perReplica),
          fmt(r.slowShare, 3),
          countsText(r.decisions),
        ]),
      },
      {
        title: '(v) Client TTFT by replica and turn (first turn: nothing cached anywhere)',
        columns: ['policy', 'replica, turn', 'requests', 'p50 ms', 'p99 ms', 'max ms'],
        rows: rows.flatMap((r) =>
          Object.entries(r.ttftBy)
            .sort(([a], [b]) => a.localeCompare(b))
            .map(([k, s]) => [r.row, k, String(s.count), fmt(s.p50, 1), fmt(s.p99, 1), fmt(s.max, 1)]),
        ),
      },
    ],
    targets: judged.flatMap((aware) => {
      const p99Ratio = base ? aware.ttft.p99 / base.ttft.p99 : NaN;
      const ofOracle = aware.hitRate / aware.oracle;
      return [
        {
          target: `(v) ${aware.row}: p99 TTFT ≤ 0.7× today’s policy (least in-flight + slack 8)`,
          measured: `${fmt(p99Ratio, 2)}× (${fmt(aware.ttft.p99, 1)} vs ${fmt(base?.ttft.p99, 1)} ms)`,
          pass: Number.isNaN(p99Ratio) ? null : p99Ratio <= 0.7,
        },
        {
          target: `(v) ${aware.row}: … at ≥ 95% of the oracle hit rate`,
          measured: `${fmt(ofOracle * 100, 1)}% (${fmt(aware.hitRate, 3)} of ${fmt(aware.oracle, 3)})`,
          pass: Number.isNaN(ofOracle) ? null : ofOracle >= 0.95,
        },
      ];
    }),
    charts: [
      {
        file: 'v-ttft',
        title: '(v) Client time to first token, one replica 4x slower',
        unit: 'ms',
        categories: rows.map((r) => r.row),
        series: [
          { name: 'mean', values: rows.map((r) => r.ttft.mean) },
          { name: 'p50', values: rows.map((r) => r.ttft.p50) },
          { name: 'p99', values: rows.map((r) => r.ttft.p99) },
        ],
      },
      {
        file: 'v-share',
        title: '(v) Share of requests on the slow replica, and hit rate against the oracle',
        unit: 'fraction',
        categories: rows.map((r) => r.row),
        series: [
          { name: 'slow replica share', values: rows.map((r) => r.slowShare) },
          { name: 'hit rate', values: rows.map((r) => r.hitRate) },
          { name: 'oracle', values: rows.map((r) => r.oracle) },
        ],
        line: { value: SPEED_SHARE, label: `speed share ${fmt(SPEED_SHARE, 3)}` },
      },
    ],
    notes: [
      `Workload: scenario (e)'s (seed ${spec.seed}): Poisson arrivals at ${spec.rate} req/s for ${spec.durationS} s, ${spec.activeSessions} conversations in progress, ${spec.turns} turns each, session id in the body; here every request streams (\`"stream": true\`) so the client sees the first token. TTFT = client send → first token event, through the router.`,
      `Simulators (fresh for every row): \`${ROUTING_SIM_ARGS.join(' ')}\`; the third also \`--slowdown ${SLOWDOWN}\` (every timing ×${SLOWDOWN}: 2 ms per uncached prompt token, 20 ms between tokens). Its speed share is ${fmt(SPEED_SHARE, 3)}.`,
      'Hit rate = Σ cached_tokens / Σ prompt_tokens over the simulators, of client requests: a warm hand-off copy (`x-router-warm: 1`, one token, no client waiting for it) is counted apart, in "warm copies", and in "hit rate, copies included", which counts every prompt the simulators prefilled. Oracle = the hit rate of one KV cache that never evicts, fed every prompt of the row in send order (the prompts are the same in both rows). "sim TTFT p99" = the largest per-replica p99 of the simulators\' own TTFT (queue + prefill).',
    ],
    data: {
      spec,
      simArgs: ROUTING_SIM_ARGS,
      slowdown: SLOWDOWN,
      rows: rows.map((r) => ({ ...r, ttft: roundSummary(r.ttft), hitRate: round(r.hitRate, 4), oracle: round(r.oracle, 4), slowShare: round(r.slowShare, 4) })),
    },
  };
}

/** Scenario (v). */
export const speedScenario: Scenario = { key: 'v', id: 'v-speed', title: 'Speed-aware load', run };
