/**
 * Scenario (x), issue 15: prefix affinity on the simulators' KV cache.
 *  (a) one system prompt per conversation: session ids vs no session ids (prefix affinity) vs
 *      round-robin, against the oracle (one infinite cache);
 *  (d) the no-session-id workload through two routers sharing Redis, turns alternating;
 *  (b) 8 system prompts shared by all conversations: round-robin, session affinity alone (prefix
 *      index off), session ids with first turns placed by the index, and no session ids.
 * Fresh simulators (empty caches) and routers for every row; one seed for all.
 */
import type { SimProcess } from '../test/support/sim-process.js';
import { answerText } from './chat-workload.js';
import { fireOnSchedule, loadAgent, post } from './open-loop.js';
import { oracleHitRate, planPrefixTurns, PrefixConversation, systemPrompts, type PrefixWorkloadSpec } from './prefix-workload.js';
import { startRouter, startSims, stopSims } from './processes.js';
import { simCacheTotals } from './sim-cache-totals.js';
import { costRows, type CostRows } from './scenario-prefix-cost.js';
import { routerSet, startBenchRedis, startSharedRouters, type RouterSet } from './scenario-routing-shared.js';
import type { BenchContext, Scenario, ScenarioResult, TargetCheck } from './scenario.js';
import { fmt, round } from './stats.js';
import { CHAT_PATH } from './workload.js';

const REPLICAS = 3;
const BLOCK = 16;
const simArgs = (kvBlocks: number): string[] => [
  '--prefill-ms-per-token',
  '0.05',
  '--ttft-base-ms',
  '5',
  '--itl-ms',
  '5',
  '--block-size',
  String(BLOCK),
  '--kv-blocks',
  String(kvBlocks),
  '--max-running',
  '8',
];
/** (a)/(d): 3 × 2000 blocks hold the live conversations, one replica does not. (b): one replica cannot hold all 8 prompts. */
const KV_OWN = 2000;
const KV_SHARED = 800;

interface Row {
  group: 'a' | 'b' | 'd';
  label: string;
  ids: boolean;
  sent: number;
  ok: number;
  hitRate: number;
  oracle: number;
  ttftMeanMs: number;
  ttftP99Ms: number;
  perReplica: string;
  decisions: Record<string, number>;
}

async function drive(urls: readonly string[], spec: PrefixWorkloadSpec, ids: boolean): Promise<{ ok: number; bodies: string[] }> {
  const turns = planPrefixTurns(spec);
  const prompts = systemPrompts(spec);
  const convs = new Map<number, PrefixConversation>();
  const agent = loadAgent();
  const targets = urls.map((u) => new URL(CHAT_PATH, u));
  const bodies: string[] = [];
  let ok = 0;
  const t0 = performance.now() + 50;
  const fire = (p: (typeof turns)[number]): void => {
    let c = convs.get(p.conv);
    if (c === undefined) {
      c = new PrefixConversation(spec, p.conv, prompts[p.conv % prompts.length] ?? '', ids);
      convs.set(p.conv, c);
    }
    const conv = c;
    const url = targets[p.turn % targets.length];
    conv.last = conv.last.then(async () => {
      const body = conv.nextBody(p.turn);
      bodies.push(body);
      try {
        const r = await post(agent, url, body);
        if (r.status === 200) ok++;
        conv.answered(r.status === 200 ? answerText(r.body) : '');
      } catch {
        conv.answered('');
      }
    });
  };
  await fireOnSchedule(turns, t0, (i) => fire(turns[i]));
  await Promise.all([...convs.values()].map((c) => c.last));
  agent.destroy();
  return { ok, bodies };
}

async function runRow(
  ctx: BenchContext,
  row: Pick<Row, 'group' | 'label' | 'ids'>,
  spec: PrefixWorkloadSpec,
  kvBlocks: number,
  start: (sims: readonly SimProcess[]) => Promise<RouterSet>,
): Promise<Row> {
  const sims = await startSims(REPLICAS, simArgs(kvBlocks), 'x');
  try {
    const routers = await start(sims);
    let driven: Awaited<ReturnType<typeof drive>>;
    let decisions: Record<string, number>;
    try {
      ctx.log(`x: (${row.group}) ${row.label}`);
      driven = await drive(routers.urls, spec, row.ids);
      decisions = (await routers.decisions()).total;
    } finally {
      await routers.stop();
    }
    const stats = await Promise.all(sims.map((s) => s.stats()));
    const totals = simCacheTotals(stats);
    return {
      ...row,
      sent: driven.bodies.length,
      ok: driven.ok,
      hitRate: totals.hitRate,
      oracle: oracleHitRate(driven.bodies, BLOCK),
      ttftMeanMs: totals.ttftMeanMs,
      ttftP99Ms: totals.ttftP99Ms,
      perReplica: stats.map((s) => `${s.name}:${s.requests}`).join(' '),
      decisions,
    };
  } finally {
    await stopSims(sims);
  }
}

/** Row (a) through one router with `--workers 2` (issue 28): a conversation's turns reach both workers. */
const WORKERS_LABEL = 'no session ids, 2 workers';

/** One router with `flags`; `env` set only while it starts (the child inherits it). */
async function one(ctx: BenchContext, sims: readonly SimProcess[], flags: string[], env: Record<string, string> = {}): Promise<RouterSet> {
  const saved = Object.keys(env).map((k) => [k, process.env[k]] as const);
  Object.assign(process.env, env);
  try {
    return routerSet([await startRouter(ctx, sims, flags)]);
  } finally {
    for (const [k, v] of saved) if (v === undefined) delete process.env[k];
  }
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const quick = ctx.options.quick;
  const base: PrefixWorkloadSpec = {
    seed: 15,
    rate: 20,
    conversations: quick ? 30 : 120,
    turns: quick ? 4 : 8,
    active: 24,
    systemWords: 2000,
    shared: 0,
    userWords: 40,
    answerTokens: 24,
  };
  const sharedSpec = { ...base, shared: 8 };
  const aff = ['--routing-policy', 'affinity'];
  const rr = ['--routing-policy', 'round-robin'];
  const cost = await costRows(ctx);
  const rows: Row[] = [];
  rows.push(await runRow(ctx, { group: 'a', label: 'session ids', ids: true }, base, KV_OWN, (s) => one(ctx, s, aff)));
  rows.push(await runRow(ctx, { group: 'a', label: 'no session ids', ids: false }, base, KV_OWN, (s) => one(ctx, s, aff)));
  rows.push(await runRow(ctx, { group: 'a', label: 'no session ids, round-robin', ids: false }, base, KV_OWN, (s) => one(ctx, s, rr)));
  const workers = [...aff, '--workers', '2'];
  rows.push(await runRow(ctx, { group: 'a', label: WORKERS_LABEL, ids: false }, base, KV_OWN, (s) => one(ctx, s, workers)));
  const redis = await startBenchRedis();
  if (redis !== null) {
    try {
      const label = 'no session ids, 2 routers + Redis, turns alternate';
      rows.push(await runRow(ctx, { group: 'd', label, ids: false }, base, KV_OWN, (s) => startSharedRouters(ctx, s, redis)));
    } finally {
      await redis.stop();
    }
  }
  rows.push(await runRow(ctx, { group: 'b', label: 'round-robin', ids: true }, sharedSpec, KV_SHARED, (s) => one(ctx, s, rr)));
  const off = { ROUTER_PREFIX_AFFINITY: 'false' };
  rows.push(await runRow(ctx, { group: 'b', label: 'session affinity alone', ids: true }, sharedSpec, KV_SHARED, (s) => one(ctx, s, aff, off)));
  rows.push(await runRow(ctx, { group: 'b', label: 'session ids + first turns by prefix', ids: true }, sharedSpec, KV_SHARED, (s) => one(ctx, s, aff)));
  rows.push(await runRow(ctx, { group: 'b', label: 'no session ids', ids: false }, sharedSpec, KV_SHARED, (s) => one(ctx, s, aff)));
  return report(rows, base, sharedSpec, cost);
}

function report(rows: Row[], spec: PrefixWorkloadSpec, sharedSpec: PrefixWorkloadSpec, cost: CostRows): ScenarioResult {
  const find = (g: Row['group'], label: string): Row | undefined => rows.find((r) => r.group === g && r.label === label);
  const ids = find('a', 'session ids');
  const noIds = find('a', 'no session ids');
  const two = rows.find((r) => r.group === 'd');
  const workers = find('a', WORKERS_LABEL);
  const workersShare = workers && noIds ? workers.hitRate / noIds.hitRate : NaN;
  const bAlone = find('b', 'session affinity alone');
  const bFirst = find('b', 'session ids + first turns by prefix');
  const bRr = find('b', 'round-robin');
  const ofOracle = noIds === undefined ? NaN : noIds.hitRate / noIds.oracle;
  const ttftRatio = noIds && ids ? noIds.ttftMeanMs / ids.ttftMeanMs : NaN;
  const targets: TargetCheck[] = [
    {
      target: '(x a) no session ids: hit rate ≥ 95% of the oracle',
      measured: `${fmt(ofOracle * 100, 1)}% (${fmt(noIds?.hitRate, 3)} of ${fmt(noIds?.oracle, 3)})`,
      pass: Number.isNaN(ofOracle) ? null : ofOracle >= 0.95,
    },
    {
      target: '(x a) no session ids: TTFT mean ≤ 1.15× with session ids',
      measured: `${fmt(ttftRatio, 2)}× (${fmt(noIds?.ttftMeanMs, 1)} vs ${fmt(ids?.ttftMeanMs, 1)} ms)`,
      pass: Number.isNaN(ttftRatio) ? null : ttftRatio <= 1.15,
    },
    {
      target: '(x a) 2 workers, no session ids: hit rate ≥ 95% of 1 worker',
      measured: `${fmt(workersShare * 100, 1)}% (${fmt(workers?.hitRate, 3)} vs ${fmt(noIds?.hitRate, 3)}), ${workers === undefined ? '—' : workers.sent - workers.ok} failed`,
      pass: Number.isNaN(workersShare) || workers === undefined ? null : workersShare >= 0.95 && workers.ok === workers.sent,
    },
    {
      target: '(x d) 2 routers + Redis, no session ids: hit rate within 0.05 of one router',
      measured: two && noIds ? `${fmt(two.hitRate, 3)} vs ${fmt(noIds.hitRate, 3)}` : 'no row (redis-server not installed)',
      pass: two && noIds ? Math.abs(two.hitRate - noIds.hitRate) <= 0.05 : null,
    },
    {
      target: '(x b) shared prompts: first turns by prefix beat session affinity alone and round-robin on hit rate',
      measured: `${fmt(bFirst?.hitRate, 3)} vs ${fmt(bAlone?.hitRate, 3)} / ${fmt(bRr?.hitRate, 3)}`,
      pass: bFirst && bAlone && bRr ? bFirst.hitRate > bAlone.hitRate && bFirst.hitRate > bRr.hitRate : null,
    },
  ];
  const name = (r: Row): string => `(${r.group}) ${r.label}`;
  const decisions = (r: Row): string =>
    Object.entries(r.decisions)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
  return {
    id: 'x-prefix',
    title: 'Prefix affinity: no session ids, shared system prompts, two routers (issue 15)',
    tables: [
      {
        title: `(x) ${spec.conversations} conversations × ${spec.turns} turns, ${spec.systemWords}-token system prompts, ${spec.rate} req/s, ${REPLICAS} KV-cache simulators`,
        columns: ['row', 'sent', 'ok', 'hit rate', 'oracle', 'of oracle', 'sim TTFT mean ms', 'sim TTFT p99 ms', 'requests per replica', 'decisions'],
        rows: rows.map((r) => [
          name(r),
          String(r.sent),
          String(r.ok),
          fmt(r.hitRate, 3),
          fmt(r.oracle, 3),
          `${fmt((r.hitRate / r.oracle) * 100, 1)}%`,
          fmt(r.ttftMeanMs, 1),
          fmt(r.ttftP99Ms, 1),
          r.perReplica,
          decisions(r),
        ]),
      },
      ...cost.tables,
    ],
    targets: [...targets, ...cost.targets],
    charts: [
      {
        file: 'x-hit-rate',
        title: '(x) KV-cache hit rate',
        unit: 'cached / prompt tokens',
        categories: rows.map(name),
        series: [
          { name: 'hit rate', values: rows.map((r) => r.hitRate) },
          { name: 'oracle', values: rows.map((r) => r.oracle) },
        ],
      },
      {
        file: 'x-ttft',
        title: '(x) Simulator TTFT',
        unit: 'ms',
        categories: rows.map(name),
        series: [
          { name: 'mean', values: rows.map((r) => r.ttftMeanMs) },
          { name: 'p99', values: rows.map((r) => r.ttftP99Ms) },
        ],
      },
    ],
    notes: [
      `Workload (seed ${spec.seed}): ${spec.conversations} conversations of ${spec.turns} turns, Poisson arrivals at ${spec.rate} req/s, ${spec.active} conversations in progress at a time; every turn re-sends the whole history (system prompt of ${spec.systemWords} words, ${spec.userWords}-word user messages, ${spec.answerTokens}-token answers). Rows (a), (d): a system prompt per conversation, simulators \`${simArgs(KV_OWN).join(' ')}\`. Rows (b): ${sharedSpec.shared} system prompts shared round the conversations (conversation i uses prompt i mod ${sharedSpec.shared}), simulators with --kv-blocks ${KV_SHARED} (one replica cannot hold all ${sharedSpec.shared} prompts, ~${Math.ceil(spec.systemWords / BLOCK)} blocks each).`,
      "Hit rate = Σ cached_tokens / Σ prompt_tokens over the simulators. Oracle = the same row's prompts, in send order, through one KV cache that never evicts (src/sim/kv-cache.ts): every prefix ever sent is a hit. Simulator TTFT = queue behind --max-running + 5 ms + 0.05 ms per uncached token; mean exact, p99 the largest per-replica p99.",
      '"session affinity alone" = `ROUTER_PREFIX_AFFINITY=false`: session ids pin, first turns go to the least loaded in rotation. (d): two routers with `--redis-url`, turn k of every conversation to router k mod 2.',
      ...cost.notes,
    ],
    data: { ...cost.data, spec, sharedSpec, rows: rows.map((r) => ({ ...r, hitRate: round(r.hitRate, 4), oracle: round(r.oracle, 4) })) },
  };
}

/** Scenario (x). */
export const prefixScenario: Scenario = { key: 'x', id: 'x-prefix', title: 'Prefix affinity', run };
