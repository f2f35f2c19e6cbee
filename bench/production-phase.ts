/**
 * One phase of scenario (w): four fresh simulators, one proxy in front of them (the router run as
 * an operator runs it, or the plain Node pipe proxy), the load generator as a child process, and
 * every observation taken from outside while it runs (CPU and memory from /proc, the router's
 * /metrics, /health pollers, the router's log). Ends once every request has settled everywhere.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { sum, type Sample } from '../test/support/prom.js';
import type { SimProcess, SimStats } from '../test/support/sim-process.js';
import { startQuietRouter, type QuietRouter } from '../test/reliability/load.js';
import { procStats, startSims, stopSims, track, waitUntil } from './processes.js';
import type { ProductionLoadResult, ProductionLoadSpec, ProductionProgress } from './production-load.js';
import { cpuSeconds, listenOverflows, machineCpu, MetricsWatch, Poller, ProcWatch } from './production-watch.js';
import { startNodeProxy } from './reference-proxies.js';
import type { BenchContext } from './scenario.js';
import { summarize } from './stats.js';

/** Compiled load-generator child (`dist-test/bench/production-child.js`). */
const LOAD_CHILD = resolve(dirname(fileURLToPath(import.meta.url)), 'production-child.js');

/** A progress tick of the generator, with the CPU counters read at that moment. */
export interface Tick extends ProductionProgress {
  readonly proxyCpuS: number;
  readonly simsCpuS: number;
  readonly generatorCpuS: number;
  readonly machine: { readonly busy: number; readonly total: number };
}

/** CPU over the steady part of the load (ramp and the first seconds of steady state left out). */
export interface SteadyWindow {
  readonly seconds: number;
  readonly events: number;
  readonly chunksPerS: number;
  /** Percent of one core. */
  readonly proxyCpuPct: number;
  readonly simsCpuPct: number;
  readonly generatorCpuPct: number;
  /** Percent of every core of the machine. */
  readonly machineBusyPct: number;
  /** Proxy CPU microseconds per SSE event relayed. */
  readonly proxyUsPerChunk: number;
}

/** What only the router phase observes. */
export interface RouterObservations {
  /** Router log lines announcing a replica `unready` (each one a demotion). */
  readonly unreadyLines: string[];
  /** Seconds after the router started at which a replica turned unready (log times); how often one turned ready again. */
  readonly unreadyAtS: number[];
  readonly readyAgain: number;
  /** The router's probes that took longer than 1 s (from affinity_router_health_check_duration_seconds). */
  readonly probesOver1s: number;
  /** Warn-or-worse lines that are not per-request lines (first few). */
  readonly problemLines: string[];
  readonly probes: { readonly ok: number; readonly fail: number };
  readonly routerHealth: PollSummary;
  readonly simsHealth: PollSummary;
  /** Event-loop delay per 5-s scrape window, beyond prom-client's 10 ms sampling period. */
  readonly lag: { readonly windows: number; readonly worstP99Ms: number; readonly medianP99Ms: number; readonly maxMs: number };
  readonly received: number;
  readonly byCause: Record<string, number>;
  readonly byStatus: Record<string, number>;
  readonly byDecision: Record<string, number>;
  readonly inflightAfter: number;
  /** Replicas whose `replica_state{state="ready"}` was not 1 in the last scrape. */
  readonly notReadyAtEnd: string[];
  /** Each request the client sent, joined with the router's log line of the same `X-Request-Id`. */
  readonly join: RequestJoin;
}

/** Client outcome × router termination cause, request by request. */
export interface RequestJoin {
  /** client outcome → router cause (`not received` when the router logged no line for it) → requests. */
  readonly matrix: Record<string, Record<string, number>>;
  readonly clientRequests: number;
  readonly routerLines: number;
  /** Router lines whose id the client never sent, and ids the router logged twice (both must be 0). */
  readonly unknownIds: number;
  readonly duplicateIds: number;
}

/** Polls of one or several /health URLs. */
export interface PollSummary {
  readonly polls: number;
  readonly bad: number;
  readonly maxMs: number;
  readonly p99Ms: number;
  readonly problems: string[];
}

/** Everything one phase measured. */
export interface PhaseResult {
  readonly target: 'router' | 'node proxy';
  readonly spec: ProductionLoadSpec;
  readonly load: ProductionLoadResult;
  readonly ticks: Tick[];
  readonly window: SteadyWindow;
  readonly idle: { readonly rssMiB: number; readonly fds: number };
  readonly peak: { readonly rssMiB: number; readonly fds: number };
  readonly after: { readonly rssMiB: number; readonly fds: number };
  /** The proxy's accept queue (sampled every second) and the kernel's listen-queue overflows during the phase (whole machine). */
  readonly accept: { readonly peakQueue: number; readonly backloggedS: number; readonly overflows: number };
  /** Σ of the simulators' `/__sim/stats` after the phase settled. */
  readonly sims: {
    readonly requests: number;
    readonly completed: number;
    readonly aborted: number;
    readonly resets: number;
    readonly inflight: number;
    readonly hitRate: number;
    readonly ttftMeanMs: number;
  };
  readonly router: RouterObservations | null;
}

/** Everything a phase needs besides the context. */
export interface PhasePlan {
  readonly target: 'router' | 'node proxy';
  readonly simArgs: readonly string[];
  readonly sims: number;
  readonly load: Omit<ProductionLoadSpec, 'url'>;
}

/** Runs one phase and stops everything it started. */
export async function runPhase(ctx: BenchContext, plan: PhasePlan): Promise<PhaseResult> {
  const sims = await startSims(plan.sims, [...plan.simArgs], plan.target === 'router' ? 'w' : 'wp');
  try {
    if (plan.target === 'node proxy') {
      const proxy = await startNodeProxy(
        sims.map((s) => s.port),
        [],
        { NODE_PROXY_MAX_SOCKETS: 'Infinity' },
      );
      try {
        return await measure(ctx, plan, sims, proxy.url, proxy.pid, null);
      } finally {
        await proxy.stop();
      }
    }
    const config = join(ctx.tmpDir, 'w-router.json');
    writeFileSync(config, JSON.stringify({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })) }, null, 2));
    // As an operator runs it: default health settings and log level, JSON log lines to a file.
    const workers = ctx.options.workers === 1 ? [] : ['--workers', String(ctx.options.workers)];
    const router = await startQuietRouter(['--config', config, ...workers]);
    try {
      return await measure(ctx, plan, sims, router.url, router.pid, router);
    } finally {
      await router.stop();
    }
  } finally {
    await stopSims(sims);
  }
}

async function measure(
  ctx: BenchContext,
  plan: PhasePlan,
  sims: readonly SimProcess[],
  url: string,
  pid: number,
  router: QuietRouter | null,
): Promise<PhaseResult> {
  const idle = procStats(pid);
  const overflowsBefore = listenOverflows();
  const proc = new ProcWatch(pid, Number(new URL(url).port), 1_000);
  const watch = router === null ? null : new MetricsWatch(url, 5_000);
  // Fresh connections, as a load balancer probes the router and the router probes its replicas.
  const routerHealth = router === null ? null : new Poller(`${url}/health`, { intervalMs: 1_000, judge: readyJudge(sims.length) });
  const simsHealth = router === null ? [] : sims.map((s) => new Poller(`${s.url}/health`, { intervalMs: 1_000 }));
  const outcomesFile = router === null ? undefined : join(ctx.tmpDir, 'w-outcomes.tsv');
  const spec: ProductionLoadSpec = { ...plan.load, url, ...(outcomesFile === undefined ? {} : { outcomesFile }) };
  ctx.log(
    `w: ${plan.target}: ${spec.streams} streams ramped over ${spec.rampMs / 1000} s, + ${spec.newSessionsPerS} new sessions/s, for ${spec.durationMs / 1000} s`,
  );
  let load: ProductionLoadResult;
  const ticks: Tick[] = [];
  try {
    load = await runLoadChild(ctx, spec, (p, genPid) => {
      const simsCpuS = sims.reduce((n, s) => n + cpuSeconds(s.pid), 0);
      ticks.push({ ...p, proxyCpuS: cpuSeconds(pid), simsCpuS, generatorCpuS: cpuSeconds(genPid), machine: machineCpu() });
    });
    ctx.log(
      `w: ${plan.target}: ${load.sent} sent, ${load.completed} completed, ${load.aborted} aborted, ${load.errors} errors; waiting for every count to settle`,
    );
    await waitUntil(async () => (await simsTotal(sims)).inflight === 0, 30_000, 'every simulator to have nothing in flight');
    if (watch !== null) {
      await waitUntil(
        async () => {
          const s = await watch.scrape();
          return (
            sum(s, 'affinity_router_requests_received_total') === sum(s, 'affinity_router_request_terminations_total') &&
            sum(s, 'affinity_router_replica_inflight') === 0
          );
        },
        30_000,
        'the router: received = Σ terminations, nothing in flight',
      );
    }
  } finally {
    proc.stop();
    await Promise.all([watch?.stop(), routerHealth?.stop(), ...simsHealth.map((p) => p.stop())]);
  }
  const after = procStats(pid);
  const totals = await simsTotal(sims);
  return {
    target: plan.target,
    spec,
    load,
    ticks,
    window: steadyWindow(ticks, spec),
    idle,
    peak: { rssMiB: proc.peakRssMiB, fds: proc.peakFds },
    after,
    accept: { peakQueue: proc.peakAcceptQueue, backloggedS: proc.backloggedSamples, overflows: listenOverflows() - overflowsBefore },
    sims: totals,
    router: router === null || watch === null || routerHealth === null ? null : observeRouter(router, watch, routerHealth, simsHealth, outcomesFile ?? ''),
  };
}

/** `/health` must also report every replica ready. */
function readyJudge(total: number): (body: string) => string | null {
  return (body) => {
    try {
      const h = JSON.parse(body) as { replicas_ready?: number };
      return h.replicas_ready === total ? null : `replicas_ready ${String(h.replicas_ready)} of ${total}`;
    } catch {
      return 'body is not JSON';
    }
  };
}

/** Spawns the generator, hands every progress tick to `onTick`, resolves with its result. */
function runLoadChild(ctx: BenchContext, spec: ProductionLoadSpec, onTick: (p: ProductionProgress, pid: number) => void): Promise<ProductionLoadResult> {
  const child = spawn(process.execPath, [LOAD_CHILD, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  const pid = child.pid ?? -1;
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => (stderr = (stderr + b.toString('utf8')).slice(-8_192)));
  let result: ProductionLoadResult | undefined;
  let lastLog = 0;
  createInterface({ input: child.stdout ?? process.stdin }).on('line', (line) => {
    const msg = JSON.parse(line) as { progress?: ProductionProgress; result?: ProductionLoadResult };
    if (msg.progress !== undefined) {
      onTick(msg.progress, pid);
      if (msg.progress.atMs - lastLog >= 30_000) {
        lastLog = msg.progress.atMs;
        const p = msg.progress;
        ctx.log(
          `w: ${Math.round(p.atMs / 1000)} s ${p.phase}: ${p.open} open, ${p.sent} sent, ${p.completed} completed, ${p.aborted} aborted, ${p.errors} errors`,
        );
      }
    }
    if (msg.result !== undefined) result = msg.result;
  });
  return new Promise((resolvePromise, reject) => {
    child.once('exit', (code) => {
      if (result !== undefined && code === 0) resolvePromise(result);
      else reject(new Error(`the load generator exited ${code} without a result: ${stderr}`));
    });
  });
}

async function simsTotal(sims: readonly SimProcess[]): Promise<PhaseResult['sims']> {
  const all: SimStats[] = await Promise.all(sims.map((s) => s.stats()));
  const add = (f: (s: SimStats) => number): number => all.reduce((n, s) => n + f(s), 0);
  const prompt = add((s) => s.cache.prompt_tokens);
  const ttftCount = add((s) => s.ttft_ms.count);
  return {
    requests: add((s) => s.requests),
    completed: add((s) => s.completed),
    aborted: add((s) => s.aborted),
    resets: add((s) => s.resets),
    inflight: add((s) => s.inflight),
    hitRate: prompt === 0 ? NaN : add((s) => s.cache.cached_tokens) / prompt,
    ttftMeanMs: ttftCount === 0 ? NaN : add((s) => s.ttft_ms.mean * s.ttft_ms.count) / ttftCount,
  };
}

/** The steady window: from 10 s (at most a fifth of the load) after the ramp to the last steady tick. */
function steadyWindow(ticks: readonly Tick[], spec: ProductionLoadSpec): SteadyWindow {
  const steady = ticks.filter((t) => t.phase === 'steady');
  const skipMs = Math.min(10_000, spec.durationMs / 5);
  const first = steady.find((t) => t.atMs >= spec.rampMs + skipMs);
  const last = steady.at(-1);
  if (first === undefined || last === undefined || last.atMs <= first.atMs) {
    return { seconds: 0, events: 0, chunksPerS: NaN, proxyCpuPct: NaN, simsCpuPct: NaN, generatorCpuPct: NaN, machineBusyPct: NaN, proxyUsPerChunk: NaN };
  }
  const seconds = (last.atMs - first.atMs) / 1000;
  const events = last.events - first.events;
  const pct = (f: (t: Tick) => number): number => ((f(last) - f(first)) / seconds) * 100;
  return {
    seconds,
    events,
    chunksPerS: events / seconds,
    proxyCpuPct: pct((t) => t.proxyCpuS),
    simsCpuPct: pct((t) => t.simsCpuS),
    generatorCpuPct: pct((t) => t.generatorCpuS),
    machineBusyPct: ((last.machine.busy - first.machine.busy) / (last.machine.total - first.machine.total)) * 100,
    proxyUsPerChunk: ((last.proxyCpuS - first.proxyCpuS) * 1e6) / events,
  };
}

function observeRouter(
  router: QuietRouter,
  watch: MetricsWatch,
  routerHealth: Poller,
  simsHealth: readonly Poller[],
  outcomesFile: string,
): RouterObservations {
  const s: Sample[] = watch.last;
  const log = readFileSync(router.logFile, 'utf8').split('\n');
  const started = ((): number => {
    const line = log.find((l) => l.includes('"event":"listening"'));
    return line === undefined ? NaN : Number((JSON.parse(line) as { time?: number }).time);
  })();
  const transitions = (event: 'ready' | 'unready'): number[] =>
    log.filter((l) => l.includes(`"event":"${event}"`)).map((l) => Math.round((Number((JSON.parse(l) as { time?: number }).time) - started) / 100) / 10);
  const unreadyAtS = transitions('unready');
  const by = (name: string, label: string): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const x of s) if (x.name === name) out[x.labels[label] ?? '?'] = (out[x.labels[label] ?? '?'] ?? 0) + x.value;
    return out;
  };
  const p99s = watch.windows.map((w) => w.p99Ms).sort((a, b) => a - b);
  const poll = (ps: readonly Poller[]): PollSummary => ({
    polls: ps.reduce((n, p) => n + p.polls, 0),
    bad: ps.reduce((n, p) => n + p.bad, 0),
    maxMs: Math.max(0, ...ps.map((p) => p.maxMs)),
    p99Ms: summarize(ps.flatMap((p) => p.latencies)).p99,
    problems: ps.flatMap((p) => p.problems.map((x) => `${p.url}: ${x}`)).slice(0, 10),
  });
  const join = joinRequests(outcomesFile, log);
  return {
    unreadyLines: log.filter((l) => l.includes('"event":"unready"')),
    unreadyAtS,
    readyAgain: transitions('ready').filter((t) => t > (unreadyAtS[0] ?? Infinity)).length,
    probesOver1s: sum(s, 'affinity_router_health_check_duration_seconds_count') - sum(s, 'affinity_router_health_check_duration_seconds_bucket', { le: '1' }),
    problemLines: router.problems().lines.slice(0, 10),
    probes: { ok: sum(s, 'affinity_router_health_checks_total', { result: 'ok' }), fail: sum(s, 'affinity_router_health_checks_total', { result: 'fail' }) },
    routerHealth: poll([routerHealth]),
    simsHealth: poll(simsHealth),
    lag: {
      windows: p99s.length,
      worstP99Ms: p99s.at(-1) ?? NaN,
      medianP99Ms: p99s[Math.floor(p99s.length / 2)] ?? NaN,
      maxMs: watch.windows.length === 0 ? NaN : Math.max(...watch.windows.map((w) => w.maxMs)),
    },
    received: sum(s, 'affinity_router_requests_received_total'),
    byCause: by('affinity_router_request_terminations_total', 'cause'),
    byStatus: by('affinity_router_requests_total', 'status'),
    byDecision: by('affinity_router_requests_total', 'decision'),
    inflightAfter: sum(s, 'affinity_router_replica_inflight'),
    join,
    notReadyAtEnd: s
      .filter((x) => x.name === 'affinity_router_replica_state' && x.labels['state'] === 'ready' && x.value !== 1)
      .map((x) => x.labels['replica'] ?? '?'),
  };
}

/** Joins the generator's `<id>\t<outcome>` lines with the router's per-request log lines (`reqId`, `cause`). */
function joinRequests(outcomesFile: string, log: readonly string[]): RequestJoin {
  const causeById = new Map<string, string>();
  let routerLines = 0;
  let duplicateIds = 0;
  for (const line of log) {
    if (!line.includes('"event":"request"')) continue;
    const { reqId, cause } = JSON.parse(line) as { reqId?: string; cause?: string };
    if (reqId === undefined) continue;
    routerLines++;
    if (causeById.has(reqId)) duplicateIds++;
    causeById.set(reqId, cause ?? '?');
  }
  const matrix: Record<string, Record<string, number>> = {};
  let clientRequests = 0;
  for (const line of readFileSync(outcomesFile, 'utf8').split('\n')) {
    if (line === '') continue;
    const [id = '', outcome = '?'] = line.split('\t');
    clientRequests++;
    const cause = causeById.get(id) ?? 'not received';
    causeById.delete(id);
    const row = (matrix[outcome] ??= {});
    row[cause] = (row[cause] ?? 0) + 1;
  }
  return { matrix, clientRequests, routerLines, unknownIds: causeById.size, duplicateIds };
}
