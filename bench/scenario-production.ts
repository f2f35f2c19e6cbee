/**
 * Scenario (w), issue 13 item 8: production-shaped load. Four simulators paced like engines
 * (TTFT 50 ms + 0.3 ms per uncached prompt token, so 80–470 ms for a first turn; 30 ± 10 ms
 * between tokens; `--max-running 256`), 2,000 resident streams plus a Poisson stream of new
 * sessions, ids in the header, in the body or absent, 2% of streams dropped by the client
 * mid-stream. Through the router run as an operator runs it, then (shorter) through the plain Node
 * pipe proxy for the CPU comparison. Reported from outside: false demotions, every request
 * accounted by cause at the client, the router and the simulators, event-loop delay, RSS, fds and
 * CPU per relayed chunk.
 */
import { availableParallelism } from 'node:os';
import type { BenchPlan } from './bench-options.js';
import type { ProductionLoadSpec } from './production-load.js';
import { runPhase, type PhaseResult } from './production-phase.js';
import type { BenchContext, Scenario, ScenarioResult, Table, TargetCheck } from './scenario.js';
import { fmt, round, roundSummary } from './stats.js';

/** Engine-like pacing; 65,536 KV blocks of 16 tokens hold ~1M tokens per replica. */
export const PRODUCTION_SIM_ARGS = [
  '--ttft-base-ms',
  '50',
  '--prefill-ms-per-token',
  '0.3',
  '--itl-ms',
  '30',
  '--itl-jitter-ms',
  '10',
  '--max-running',
  '256',
  '--kv-blocks',
  '65536',
];
const SIMS = 4;
/** The generator's own event-loop delay above this means the client, not the proxy, set the pace. */
const GENERATOR_LAG_LIMIT_MS = 50;

/** The offered load of one phase lasting `durationS` after the ramp. */
export function productionLoad(plan: BenchPlan, durationS: number): Omit<ProductionLoadSpec, 'url'> {
  return {
    streams: plan.productionStreams,
    newSessionsPerS: plan.productionRate,
    rampMs: plan.productionRampS * 1000,
    durationMs: durationS * 1000,
    seed: 13,
    sessionIdShare: 0.6,
    abortShare: 0.02,
    turns: [1, 5],
    systemWords: [100, 1400],
    userWords: [10, 60],
    outputTokens: [32, 256],
    idleTimeoutMs: 120_000,
  };
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const { plan } = ctx.options;
  const router = await runPhase(ctx, { target: 'router', simArgs: PRODUCTION_SIM_ARGS, sims: SIMS, load: productionLoad(plan, plan.productionS) });
  const proxy = await runPhase(ctx, { target: 'node proxy', simArgs: PRODUCTION_SIM_ARGS, sims: SIMS, load: productionLoad(plan, plan.productionCompareS) });
  return summarize(ctx, router, proxy);
}

/** The three views of one phase's requests, and whether they agree cause by cause. */
interface Reconciliation {
  /** Client: sent − completed − aborted − errors. */
  readonly clientMissing: number;
  /** Router: received − Σ terminations. */
  readonly routerMissing: number;
  /** Router causes other than ok / client_abort. */
  readonly routerOther: number;
  /** Requests the router forwarded: received − the ones it answered itself (no_replica, rejected). */
  readonly forwarded: number;
  /** Simulators: requests − completed − aborted − resets − in flight. */
  readonly simsMissing: number;
  /** Completed streams the router did not end `ok` (join by request id; must be 0). */
  readonly completedNotOk: number;
  /**
   * Streams the client dropped that the router had already relayed in full (`ok`): a client
   * reading late drops a stream whose end already sits in its socket buffer.
   */
  readonly abortedAfterEnd: number;
  /** Streams the client dropped that the router ended neither `client_abort` nor `ok` (must be 0). */
  readonly abortedElsewhere: number;
  /** Client errors the router ended `client_abort`: the client gave up on a request the router had read. */
  readonly errorsAbandoned: number;
  /** Client errors the router never logged (it never read the request). */
  readonly errorsNotReceived: number;
  readonly agree: boolean;
}

const outside = (row: Record<string, number> | undefined, cause: string): number =>
  Object.entries(row ?? {}).reduce((s, [k, v]) => (k === cause ? s : s + v), 0);

function reconcile(p: PhaseResult): Reconciliation {
  const { load, sims } = p;
  const router = p.router;
  const c = router?.byCause ?? {};
  const received = router?.received ?? NaN;
  const ok = c['ok'] ?? 0;
  const routerEnded = Object.values(c).reduce((s, v) => s + v, 0);
  const join = router?.join;
  const m = join?.matrix ?? {};
  const r: Omit<Reconciliation, 'agree'> = {
    clientMissing: load.sent - load.completed - load.aborted - load.errors,
    routerMissing: received - routerEnded,
    routerOther: routerEnded - ok - (c['client_abort'] ?? 0),
    forwarded: received - (c['no_replica'] ?? 0) - (c['rejected'] ?? 0),
    simsMissing: sims.requests - sims.completed - sims.aborted - sims.resets - sims.inflight,
    completedNotOk: outside(m['completed'], 'ok'),
    abortedAfterEnd: m['aborted']?.['ok'] ?? 0,
    abortedElsewhere: outside(m['aborted'], 'client_abort') - (m['aborted']?.['ok'] ?? 0),
    errorsAbandoned: Object.entries(m)
      .filter(([k]) => k !== 'completed' && k !== 'aborted')
      .reduce((s, [, row]) => s + (row['client_abort'] ?? 0), 0),
    errorsNotReceived: Object.entries(m)
      .filter(([k]) => k !== 'completed' && k !== 'aborted')
      .reduce((s, [, row]) => s + (row['not received'] ?? 0), 0),
  };
  const agree =
    join !== undefined &&
    r.clientMissing === 0 &&
    r.routerMissing === 0 &&
    r.simsMissing === 0 &&
    join.clientRequests === load.sent &&
    join.routerLines === received &&
    join.unknownIds === 0 &&
    join.duplicateIds === 0 &&
    r.completedNotOk === 0 &&
    r.abortedElsewhere === 0 &&
    received === load.sent - r.errorsNotReceived &&
    // A request whose client gave up while the router still waited for its replica to take it
    // never reaches the replica's handler; every other forwarded request does, once.
    sims.requests <= r.forwarded &&
    r.forwarded - sims.requests <= r.errorsAbandoned &&
    // Every stream the router ended ok was finished by its replica; a stream the replica finished
    // whose client left before the router relayed its end is client_abort at the router.
    ok <= sims.completed &&
    sims.completed - ok <= (c['client_abort'] ?? 0) &&
    router?.inflightAfter === 0 &&
    sims.inflight === 0;
  return { ...r, agree };
}

const n = (v: number): string => String(Math.round(v));
const kv = (r: Record<string, number>): string =>
  Object.entries(r)
    .sort()
    .map(([k, v]) => `${k} ${n(v)}`)
    .join(', ') || 'none';

function accountingTable(p: PhaseResult, rc: Reconciliation): Table {
  const c = p.router?.byCause ?? {};
  return {
    title: '(w) every request accounted by cause (router phase)',
    columns: ['where', 'sent / received', 'completed', 'aborted by the client', 'errors', 'missing'],
    rows: [
      [
        'client',
        n(p.load.sent),
        n(p.load.completed),
        n(p.load.aborted),
        `${n(p.load.errors)}${p.load.errors > 0 ? ` (${kv(p.load.errorsByKind)}; ${n(p.load.errorsBeforeRouter)} never answered by the data plane)` : ''}`,
        n(rc.clientMissing),
      ],
      [
        'router /metrics (terminations by cause)',
        `${n(p.router?.received ?? NaN)} (sent − ${n(rc.errorsNotReceived)} never read by it)`,
        `${n(c['ok'] ?? 0)} ok`,
        `${n(c['client_abort'] ?? 0)} client_abort`,
        n(rc.routerOther),
        n(rc.routerMissing),
      ],
      [
        'simulators Σ /__sim/stats',
        `${n(p.sims.requests)} (forwarded ${n(rc.forwarded)})`,
        n(p.sims.completed),
        n(p.sims.aborted),
        `${n(p.sims.resets)} resets`,
        n(rc.simsMissing),
      ],
    ],
  };
}

/** Client outcome (rows) × the router's termination cause for the same request id (columns). */
function joinTable(p: PhaseResult): Table {
  const m = p.router?.join.matrix ?? {};
  const causes = [...new Set(Object.values(m).flatMap((row) => Object.keys(row)))].sort((a, b) => (a === 'ok' ? -1 : b === 'ok' ? 1 : a.localeCompare(b)));
  const order = (k: string): number => (k === 'completed' ? 0 : k === 'aborted' ? 1 : 2);
  const outcomes = Object.keys(m).sort((a, b) => order(a) - order(b) || a.localeCompare(b));
  return {
    title: "(w) each request: the client's outcome × the router's logged cause, joined by X-Request-Id (router phase)",
    columns: ['client outcome', ...causes, 'total'],
    rows: outcomes.map((o) => {
      const row = m[o] ?? {};
      return [o, ...causes.map((c) => n(row[c] ?? 0)), n(Object.values(row).reduce((a, b) => a + b, 0))];
    }),
  };
}

/** Tables, targets and notes of scenario (w) from its two phases (exported to re-render a saved run). */
export function summarize(ctx: Pick<BenchContext, 'options'>, router: PhaseResult, proxy: PhaseResult): ScenarioResult {
  const { plan } = ctx.options;
  const r = router.router;
  if (r === null) throw new Error('the router phase has no router observations');
  const unready = r.unreadyLines.length;
  const simsHealthy = r.simsHealth.bad === 0 && r.simsHealth.polls > 0;
  const genLag = Math.max(router.load.generatorLagMs.p99, proxy.load.generatorLagMs.p99);
  const ratio = router.window.proxyUsPerChunk / proxy.window.proxyUsPerChunk;
  const rc = reconcile(router);
  const targets: TargetCheck[] = [
    {
      target: '(w) no false demotion: 0 unready transitions and 0 failed probes while every simulator stayed healthy',
      measured: `${unready} unready transitions, ${n(r.probes.fail)} failed of ${n(r.probes.ok + r.probes.fail)} probes; the simulators answered /health 200 in ${n(r.simsHealth.polls - r.simsHealth.bad)}/${n(r.simsHealth.polls)} polls`,
      pass: simsHealthy ? unready === 0 && r.probes.fail === 0 : null,
    },
    {
      target: '(w) every request accounted by cause: sent = completed + aborted + errors, and the router and the simulators agree cause by cause',
      measured:
        `${n(router.load.sent)} sent = ${n(router.load.completed)} completed + ${n(router.load.aborted)} aborted + ${n(router.load.errors)} errors; ` +
        `router received ${n(r.received)} (${n(r.join.routerLines)} log lines, ${n(r.join.unknownIds)} unknown ids): ${kv(r.byCause)}; ` +
        `completed but not ok ${n(rc.completedNotOk)}, dropped after the router had relayed the end ${n(rc.abortedAfterEnd)}, dropped and ended otherwise ${n(rc.abortedElsewhere)}; ` +
        `simulators ${n(router.sims.requests)}: ${n(router.sims.completed)} completed + ${n(router.sims.aborted)} aborted + ${n(router.sims.resets)} resets`,
      pass: rc.agree,
    },
    {
      target: '(w) no errors: every stream its client did not drop ended with data: [DONE]',
      measured: router.load.errors === 0 ? '0 errors' : `${n(router.load.errors)} errors: ${kv(router.load.errorsByKind)}`,
      pass: router.load.errors === 0,
    },
    {
      target: "(w) the router's /health answered 200 with every replica ready throughout",
      measured: `${n(r.routerHealth.polls - r.routerHealth.bad)}/${n(r.routerHealth.polls)} polls (p99 ${fmt(r.routerHealth.p99Ms, 0)} ms, slowest ${fmt(r.routerHealth.maxMs, 0)} ms)`,
      pass: r.routerHealth.bad === 0 && r.routerHealth.polls > 0,
    },
    {
      target: `(w) the load generator is not the bottleneck: ${plan.productionStreams} streams open, its own event-loop delay p99 < ${GENERATOR_LAG_LIMIT_MS} ms`,
      measured: `peak ${n(router.load.peakOpen)} open; generator delay p99 ${fmt(router.load.generatorLagMs.p99, 1)} ms (router phase), ${fmt(proxy.load.generatorLagMs.p99, 1)} ms (node proxy phase)`,
      pass: router.load.peakOpen >= plan.productionStreams && genLag < GENERATOR_LAG_LIMIT_MS,
    },
  ];
  const row = (p: PhaseResult): string[] => [
    p.target,
    fmt(p.window.seconds, 0),
    n(p.window.chunksPerS),
    fmt(p.window.proxyCpuPct, 1),
    fmt(p.window.proxyUsPerChunk, 2),
    fmt(p.idle.rssMiB, 1),
    fmt(p.peak.rssMiB, 1),
    n(p.peak.fds),
    fmt(p.window.simsCpuPct, 1),
    fmt(p.window.generatorCpuPct, 1),
    fmt(p.window.machineBusyPct, 1),
    n(p.accept.peakQueue),
    n(p.accept.backloggedS),
    n(p.accept.overflows),
    `${n(p.load.errors)}`,
  ];
  const tables: Table[] = [
    accountingTable(router, rc),
    joinTable(router),
    {
      title: '(w) health and event loop of the router (router phase)',
      columns: [
        'unready transitions (s after start)',
        'ready again',
        'probes ok / failed',
        'probes > 1 s',
        'router /health polls bad (fresh connections)',
        'simulator /health polls bad, p99 / max ms (fresh connections)',
        'event-loop delay p99, median window ms',
        'p99, worst window ms',
        'max ms',
        '5-s windows',
      ],
      rows: [
        [
          unready === 0 ? '0' : `${n(unready)} (${r.unreadyAtS.slice(0, 12).join(', ')}${unready > 12 ? ', …' : ''})`,
          n(r.readyAgain),
          `${n(r.probes.ok)} / ${n(r.probes.fail)}`,
          n(r.probesOver1s),
          `${n(r.routerHealth.bad)} of ${n(r.routerHealth.polls)}`,
          `${n(r.simsHealth.bad)} of ${n(r.simsHealth.polls)}, ${fmt(r.simsHealth.p99Ms, 0)} / ${fmt(r.simsHealth.maxMs, 0)}`,
          fmt(r.lag.medianP99Ms, 1),
          fmt(r.lag.worstP99Ms, 1),
          fmt(r.lag.maxMs, 1),
          n(r.lag.windows),
        ],
      ],
    },
    {
      title: '(w) CPU per relayed chunk under the same load (steady window), memory and fds',
      columns: [
        'proxy',
        'window s',
        'chunks/s',
        'proxy CPU % of a core',
        'proxy CPU µs/chunk',
        'idle RSS MiB',
        'peak RSS MiB',
        'peak fds',
        'simulators CPU %',
        'generator CPU %',
        'machine busy %',
        'accept queue peak',
        's with ≥ 256 waiting',
        'listen overflows (machine)',
        'client errors',
      ],
      rows: [row(router), row(proxy)],
    },
    {
      title: '(w) what the clients saw (router phase)',
      columns: [
        'requests',
        'conversations resident + Poisson',
        'ids header / body / none',
        'peak open streams',
        'first event p50 ms',
        'p99 ms',
        'sim prefix-cache hit rate',
        'routing decisions',
      ],
      rows: [
        [
          n(router.load.sent),
          `${n(router.load.conversations.resident)} + ${n(router.load.conversations.poisson)}`,
          `${n(router.load.byIdMode.header)} / ${n(router.load.byIdMode.body)} / ${n(router.load.byIdMode.none)}`,
          n(router.load.peakOpen),
          fmt(router.load.ttftMs.p50, 0),
          fmt(router.load.ttftMs.p99, 0),
          fmt(router.sims.hitRate, 3),
          kv(r.byDecision),
        ],
      ],
    },
  ];
  const notes = [
    `Simulators: ${SIMS} × \`${PRODUCTION_SIM_ARGS.join(' ')}\`, restarted for each phase. Load: ${plan.productionStreams} resident streams started over ${plan.productionRampS} s, each running conversations of 1–5 turns back to back, plus new conversations arriving as a Poisson process at ${plan.productionRate}/s; system prompts of 100–1,400 words (first-turn TTFT 80–470 ms before any queueing), 10–60 new user words per turn, 32–256 tokens per answer; 30% of conversations carry \`X-Session-Id\`, 30% a body \`session_id\`, 40% no id (prefix routing); 2% of streams are dropped by the client after a random number of events. Router phase ${plan.productionS} s after the ramp, node proxy phase ${plan.productionCompareS} s; no turn starts after that, the streams in flight finish.`,
    `The router runs as an operator runs it: \`node dist-test/src/main.js --config <4 static replicas> --host 127.0.0.1 --port 0${ctx.options.workers === 1 ? '' : ` --workers ${ctx.options.workers}`}\`, default health settings (probe every 5 s, 2 s timeout, 2 failures to demote) and log level (info, JSON lines to a file). The plain Node pipe proxy (node-proxy.ts) runs with no socket cap per upstream (\`NODE_PROXY_MAX_SOCKETS=Infinity\`), like the router.`,
    `With --max-running 256 and ~500 streams per replica, about half of every replica's streams wait in the engine's queue: the first-event times above include that wait (the simulators' own mean TTFT, queue included: ${fmt(router.sims.ttftMeanMs, 0)} ms). Accept queue: the \`rx_queue\` of the proxy's LISTEN socket in /proc/net/tcp, every second (Node listens with a backlog of 511; libuv accepts one connection per event-loop turn, so a busy proxy drains it slowly); listen overflows: the kernel's TcpExt ListenOverflows over the phase, every socket of the machine.`,
    `Event-loop delay: prom-client's default \`nodejs_eventloop_lag_p99_seconds\` / \`_max_seconds\` in the router's /metrics, scraped every 5 s (prom-client restarts its histogram at each scrape, so each scrape is one 5-s window); its 10 ms sampling period is subtracted. CPU: utime + stime from /proc/<pid>/stat at each 1-s progress tick of the generator, over the steady window (the ramp and the first 10 s after it left out), divided by the SSE events the clients received in that window. RSS and fds: /proc/<pid>/status and /proc/<pid>/fd every second. Machine busy %: /proc/stat over the same window, all cores.`,
    ...(ctx.options.workers === 1
      ? []
      : [
          `With --workers ${ctx.options.workers}, the router's CPU, RSS and fds are the primary's and its workers' together (every descendant in /proc), the event-loop delay and the /health poller are the primary's (which answers the probes and relays no tokens).`,
        ]),
    `Router CPU per relayed chunk: ${fmt(router.window.proxyUsPerChunk, 2)} µs vs ${fmt(proxy.window.proxyUsPerChunk, 2)} µs for the plain Node pipe proxy (${fmt(ratio, 2)}×). The router also reads each request body (session peek, prefix hashing of up to a few KB of prompt), keeps a session directory and writes one log line per request; the pipe proxy does none of that.`,
  ];
  for (const p of [router, proxy]) {
    const ours = p.window.proxyCpuPct + p.window.simsCpuPct + p.window.generatorCpuPct;
    const machine = (p.window.machineBusyPct * availableParallelism()) / 100;
    notes.push(
      `${p.target} phase, steady window: this scenario's processes used ${fmt(ours, 0)}% of one core; the machine was ${fmt(p.window.machineBusyPct, 0)}% busy over ${availableParallelism()} cores, so other work on it took about ${fmt(machine * 100 - ours, 0)}% of a core.`,
    );
  }
  if (unready > 0) notes.push(`Demotions logged by the router: ${r.unreadyLines.slice(0, 5).join(' / ')}`);
  if (r.problemLines.length > 0) notes.push(`Router warnings/errors (first ${r.problemLines.length}): ${r.problemLines.join(' / ')}`);
  const failures = [...router.load.failures, ...r.routerHealth.problems, ...r.simsHealth.problems];
  if (failures.length > 0) notes.push(`First failures: ${failures.slice(0, 8).join('; ')}`);
  if (proxy.load.errors > 0) notes.push(`Node proxy phase client errors: ${kv(proxy.load.errorsByKind)}; ${proxy.load.failures.slice(0, 3).join('; ')}`);
  const phaseData = (p: PhaseResult): Record<string, unknown> => ({
    target: p.target,
    spec: { ...p.spec, url: undefined },
    load: { ...p.load, ttftMs: roundSummary(p.load.ttftMs), gapMs: roundSummary(p.load.gapMs) },
    window: Object.fromEntries((Object.entries(p.window) as Array<[string, number]>).map(([k, v]) => [k, round(v, 3)])),
    idle: p.idle,
    peak: p.peak,
    after: p.after,
    accept: p.accept,
    sims: p.sims,
    router: p.router,
    ticks: p.ticks.filter((_, i) => i % 10 === 0),
  });
  return {
    id: 'w-production',
    title: 'Production-shaped load',
    tables,
    targets,
    charts: [
      {
        file: 'w-cpu-per-chunk',
        title: '(w) Proxy CPU per relayed chunk',
        unit: 'µs',
        categories: [router.target, proxy.target],
        series: [{ name: 'CPU µs per chunk', values: [router.window.proxyUsPerChunk, proxy.window.proxyUsPerChunk] }],
      },
    ],
    notes,
    data: { sims: SIMS, simArgs: PRODUCTION_SIM_ARGS, router: phaseData(router), nodeProxy: phaseData(proxy) },
  };
}

/** Scenario (w). */
export const productionScenario: Scenario = { key: 'w', id: 'w-production', title: 'Production-shaped load', run };
