/**
 * Scenario (e): routing quality. Three simulators with the prefix KV-cache model, the multi-turn
 * chat workload of chat-workload.ts at a fixed Poisson offered rate, run once per policy
 * (`affinity`, `round-robin`, `least-outstanding`) with the same seed; fresh simulators (empty
 * caches, zeroed stats) and a fresh router for every policy. Then the affinity run again through
 * two routers sharing sessions through Redis (scenario-routing-shared.ts, issue 8).
 */
import type { SimProcess } from '../test/support/sim-process.js';
import { answerText, Conversation, defaultChatWorkload, planChat, sharedPreamble, type ChatWorkloadSpec } from './chat-workload.js';
import { fireOnSchedule, loadAgent, post } from './open-loop.js';
import { startRouter, startSims, stopSims } from './processes.js';
import { simCacheTotals } from './sim-cache-totals.js';
import {
  routerSet,
  SHARED_ROW,
  sharedNote,
  sharedTarget,
  startBenchRedis,
  startSharedRouters,
  type RouterSet,
  type SharedMissing,
} from './scenario-routing-shared.js';
import type { BenchContext, Scenario, ScenarioResult } from './scenario.js';
import { fmt, perReplicaText, round, roundSummary, summarize, type Summary } from './stats.js';
import { CHAT_PATH } from './workload.js';

/** The routing policies compared (the router's `--routing-policy`). */
export const POLICIES = ['affinity', 'round-robin', 'least-outstanding'] as const;

/** Simulator flags of scenario (e): KV model sized so 3 replicas hold the working set, 1 does not. */
export const ROUTING_SIM_ARGS = [
  '--prefill-ms-per-token',
  '0.5',
  '--ttft-base-ms',
  '5',
  '--itl-ms',
  '5',
  '--block-size',
  '16',
  '--kv-blocks',
  '1200',
  '--max-running',
  '8',
];
const REPLICAS = 3;
/** The affinity row through one router with `--workers 2` (issue 28): its turns land on both workers. */
const WORKERS_POLICY_ROW = 'affinity, 2 workers';

/** One policy's numbers. */
export interface PolicyRow {
  policy: string;
  sent: number;
  ok: number;
  failed: number;
  /** Turns that left late because the conversation's previous answer had not arrived yet. */
  waitedForPrevious: number;
  completedPerS: number;
  hitRate: number;
  promptTokens: number;
  cachedTokens: number;
  /** Simulator-side TTFT (queue + base + uncached prefill), count-weighted over replicas. */
  simTtftMeanMs: number;
  /** Largest per-replica p99 (an upper bound of the fleet p99). */
  simTtftP99Ms: number;
  client: Summary;
  perReplica: Record<string, number>;
  /** Conversations the simulators saw (by `x-session-id`) on more than one replica. */
  splitSessions: number;
  /** The routers' routing decisions (`affinity_router_requests_total` by decision;reason), summed. */
  decisions: Record<string, number>;
  /** Requests each router counted (one entry per router). */
  perRouter: number[];
}

type Driven = Pick<PolicyRow, 'sent' | 'ok' | 'failed' | 'waitedForPrevious' | 'completedPerS' | 'client'>;

/** Plays the workload; turn k of a conversation goes to `bases[k % bases.length]`. */
async function drive(bases: readonly string[], spec: ChatWorkloadSpec): Promise<Driven> {
  const { turns } = planChat(spec);
  const preamble = sharedPreamble(spec);
  const conversations = new Map<number, Conversation>();
  const agent = loadAgent();
  const urls = bases.map((b) => new URL(CHAT_PATH, b));
  if (urls.length === 0) throw new Error('scenario e: drive() needs at least one router URL');
  const latencies: number[] = [];
  let ok = 0;
  let failed = 0;
  let waited = 0;
  let lastEnd = 0;
  const t0 = performance.now() + 50;
  const fire = (i: number): void => {
    const p = turns[i];
    const url = p === undefined ? undefined : urls[p.turn % urls.length];
    if (p === undefined || url === undefined) return;
    let conv = conversations.get(p.session);
    if (conv === undefined) {
      conv = new Conversation(spec, p.session, preamble);
      conversations.set(p.session, conv);
    }
    const c = conv;
    const due = t0 + p.atMs;
    c.last = c.last.then(async () => {
      if (performance.now() - due > 1) waited++;
      try {
        const r = await post(agent, url, c.nextBody(p.turn));
        lastEnd = Math.max(lastEnd, r.endAt);
        if (r.status === 200) {
          ok++;
          latencies.push(r.endAt - r.startAt);
          c.answered(answerText(r.body));
        } else {
          failed++;
          c.answered('');
        }
      } catch {
        failed++;
        c.answered('');
      }
    });
  };
  await fireOnSchedule(turns, t0, fire);
  await Promise.all([...conversations.values()].map((c) => c.last));
  agent.destroy();
  return {
    sent: turns.length,
    ok,
    failed,
    waitedForPrevious: waited,
    completedPerS: lastEnd > t0 ? ok / ((lastEnd - t0) / 1000) : 0,
    client: summarize(latencies),
  };
}

/** Conversations seen on more than one replica, from the simulators' `by_session` counts. */
function splitSessions(stats: ReadonlyArray<{ by_session: Record<string, number> }>): number {
  const where = new Map<string, number>();
  for (const s of stats) for (const [id, n] of Object.entries(s.by_session)) if (n > 0) where.set(id, (where.get(id) ?? 0) + 1);
  return [...where.values()].filter((replicas) => replicas > 1).length;
}

/** One row: fresh simulators, the routers `start` returns, the workload, then the simulators' stats. */
async function runRow(
  ctx: BenchContext,
  policy: string,
  spec: ChatWorkloadSpec,
  start: (sims: readonly SimProcess[]) => Promise<RouterSet>,
): Promise<PolicyRow> {
  const sims: SimProcess[] = await startSims(REPLICAS, ROUTING_SIM_ARGS, 'e');
  try {
    const routers = await start(sims);
    let driven: Driven;
    let decisions: Awaited<ReturnType<RouterSet['decisions']>>;
    try {
      ctx.log(`e: ${policy}: ${spec.durationS}s of multi-turn chat at ${spec.rate} req/s (Poisson)`);
      driven = await drive(routers.urls, spec);
      decisions = await routers.decisions();
    } finally {
      await routers.stop();
    }
    const stats = await Promise.all(sims.map((s) => s.stats()));
    const totals = simCacheTotals(stats);
    return {
      policy,
      ...driven,
      hitRate: totals.hitRate,
      promptTokens: totals.promptTokens,
      cachedTokens: totals.cachedTokens,
      simTtftMeanMs: totals.ttftMeanMs,
      simTtftP99Ms: totals.ttftP99Ms,
      perReplica: Object.fromEntries(stats.map((s) => [s.name, s.requests])),
      splitSessions: splitSessions(stats),
      decisions: decisions.total,
      perRouter: decisions.perRouter,
    };
  } finally {
    await stopSims(sims);
  }
}

/**
 * The two-router row, or why there is none: redis-server not installed (skipped), or the row crashed
 * (reported as a failed target rather than losing the three single-router rows).
 */
async function runSharedRow(ctx: BenchContext, spec: ChatWorkloadSpec): Promise<PolicyRow | SharedMissing> {
  try {
    const redis = await startBenchRedis();
    if (redis === null) return { reason: 'redis-server is not installed (looked in /usr/bin and /usr/local/bin)', crashed: false };
    try {
      return await runRow(ctx, SHARED_ROW, spec, (sims) => startSharedRouters(ctx, sims, redis));
    } finally {
      await redis.stop();
    }
  } catch (e: unknown) {
    return { reason: `crashed: ${e instanceof Error ? e.message : String(e)}`.slice(0, 600), crashed: true };
  }
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const { plan } = ctx.options;
  const spec = defaultChatWorkload(plan.routingRate, plan.routingS);
  const rows: PolicyRow[] = [];
  for (const policy of POLICIES)
    rows.push(await runRow(ctx, policy, spec, async (sims) => routerSet([await startRouter(ctx, sims, ['--routing-policy', policy])])));
  rows.push(
    await runRow(ctx, WORKERS_POLICY_ROW, spec, async (sims) => routerSet([await startRouter(ctx, sims, ['--routing-policy', 'affinity', '--workers', '2'])])),
  );
  const shared = await runSharedRow(ctx, spec);
  const missing = 'crashed' in shared ? shared : null;
  if ('crashed' in shared) ctx.log(`e: ${SHARED_ROW}: no row, ${shared.reason}`);
  else rows.push(shared);
  const by = (p: string): PolicyRow | undefined => rows.find((r) => r.policy === p);
  const aff = by('affinity');
  const rr = by('round-robin');
  const lo = by('least-outstanding');
  const two = by(SHARED_ROW);
  const workers = by(WORKERS_POLICY_ROW);
  const workersDelta = aff && workers ? workers.hitRate - aff.hitRate : NaN;
  const hitRatio = aff && rr ? (rr.hitRate === 0 ? Infinity : aff.hitRate / rr.hitRate) : NaN;
  const lowerTtft = aff && rr && lo ? aff.simTtftMeanMs < rr.simTtftMeanMs && aff.simTtftMeanMs < lo.simTtftMeanMs : null;
  const { sessions, turns } = planChat(spec);
  const final = 1 + spec.preambleWords + spec.systemWords + spec.turns * (1 + spec.userWords) + (spec.turns - 1) * (1 + spec.answerTokens);
  const notes = [
    `Workload (seed ${spec.seed}, identical for every policy): ${turns.length} requests over ${sessions} sessions, Poisson arrivals at ${spec.rate} req/s for ${spec.durationS} s, ${spec.activeSessions} conversations in progress at a time, ${spec.turns} turns each; prompt = a ${spec.preambleWords}-word preamble shared by all sessions + a ${spec.systemWords}-word system prompt per session + the history + a ${spec.userWords}-word user message; answers are ${spec.answerTokens} tokens, appended to the history as returned. Non-streaming; session id in the body.`,
    `Simulators (${REPLICAS}, restarted for every policy so caches and stats start empty): \`${ROUTING_SIM_ARGS.join(' ')}\`. A conversation's last prompt is ~${final} tokens (~${Math.ceil(final / 16)} blocks); ${spec.activeSessions} live conversations need ~${spec.activeSessions * Math.ceil(final / 32)}–${spec.activeSessions * Math.ceil(final / 16)} blocks: more than one replica's 1200, less than three replicas' 3600.`,
    sharedNote(missing, two?.decisions, two?.perRouter, sessions),
    'Hit rate = Σ cached_tokens / Σ prompt_tokens over the simulators (`/__sim/stats`). Simulator TTFT = queue wait behind --max-running + base + 0.5 ms per uncached token; mean is exact (count-weighted), p99 is the largest per-replica p99. Client latency = whole non-streaming exchange (TTFT + 23 × 5 ms generation + network).',
  ];
  return {
    id: 'e-routing',
    title: 'Routing quality: affinity vs round-robin vs least-outstanding; affinity through 2 routers + Redis',
    tables: [
      {
        title: `(e) Multi-turn chat, ${spec.rate} req/s offered, ${REPLICAS} KV-cache simulators`,
        columns: [
          'policy',
          'sent',
          'ok',
          'failed',
          'done req/s',
          'hit rate',
          'sim TTFT mean ms',
          'sim TTFT p99 ms',
          'client mean ms',
          'client p99 ms',
          'requests per replica',
          'sessions on >1 replica',
        ],
        rows: rows.map((r) => [
          r.policy,
          String(r.sent),
          String(r.ok),
          String(r.failed),
          fmt(r.completedPerS, 1),
          fmt(r.hitRate, 3),
          fmt(r.simTtftMeanMs, 1),
          fmt(r.simTtftP99Ms, 1),
          fmt(r.client.mean, 1),
          fmt(r.client.p99, 1),
          perReplicaText(r.perReplica),
          String(r.splitSessions),
        ]),
      },
    ],
    targets: [
      {
        target: '(e) affinity hit rate ≥ 1.5× round-robin',
        measured: `${fmt(hitRatio, 2)}× (${fmt(aff?.hitRate, 3)} vs ${fmt(rr?.hitRate, 3)})`,
        pass: Number.isNaN(hitRatio) ? null : hitRatio >= 1.5,
      },
      {
        target: '(e) affinity mean TTFT lower than round-robin and least-outstanding',
        measured: `${fmt(aff?.simTtftMeanMs, 1)} ms vs ${fmt(rr?.simTtftMeanMs, 1)} / ${fmt(lo?.simTtftMeanMs, 1)} ms`,
        pass: lowerTtft,
      },
      sharedTarget(aff?.hitRate, two?.hitRate, missing),
      {
        target: '(e) 2 workers: session-id hit rate equal to 1 worker (|Δ| ≤ 0.01 absolute), no failed request',
        measured: `${fmt(workers?.hitRate, 3)} vs ${fmt(aff?.hitRate, 3)} (Δ ${fmt(workersDelta, 3)}), ${workers?.failed ?? '—'} failed`,
        pass: Number.isNaN(workersDelta) ? null : Math.abs(workersDelta) <= 0.01 && workers?.failed === 0,
      },
    ],
    charts: [
      {
        file: 'e-hit-rate',
        title: '(e) KV-cache hit rate by policy',
        unit: 'cached / prompt tokens',
        categories: rows.map((r) => r.policy),
        series: [{ name: 'hit rate', values: rows.map((r) => r.hitRate) }],
      },
      {
        file: 'e-ttft',
        title: '(e) Simulator TTFT by policy',
        unit: 'ms',
        categories: rows.map((r) => r.policy),
        series: [
          { name: 'mean', values: rows.map((r) => r.simTtftMeanMs) },
          { name: 'p99', values: rows.map((r) => r.simTtftP99Ms) },
        ],
      },
    ],
    notes,
    data: {
      spec,
      simArgs: ROUTING_SIM_ARGS,
      sharedMissing: missing,
      sessions,
      requests: turns.length,
      rows: rows.map((r) => ({ ...r, hitRate: round(r.hitRate, 4), client: roundSummary(r.client) })),
    },
  };
}

/** Scenario (e). */
export const routingScenario: Scenario = { key: 'e', id: 'e-routing', title: 'Routing quality', run };
