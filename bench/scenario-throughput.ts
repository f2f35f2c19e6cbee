/**
 * Scenario (a): closed-loop throughput of non-streaming ~1 KB chat completions with a body
 * `session_id` rotated over 500 sessions, 32 connections, for direct-to-one-simulator, the router,
 * nginx, and as references haproxy and a plain Node pipe proxy (all in front of the same
 * simulators); then latency at one connection.
 */
import type { SimProcess } from '../test/support/sim-process.js';
import { combineLoads, runClosedLoop, type LoadResult } from './load.js';
import { NGINX_SETTINGS, startNginx } from './nginx.js';
import { HAPROXY_SETTINGS, startHaproxy, startNodeProxy } from './reference-proxies.js';
import { procStats, startRouter, startSims, stopSims } from './processes.js';
import type { BenchContext, Scenario, ScenarioResult, TargetCheck } from './scenario.js';
import { fmt, fmtDelta, perReplicaText, round } from './stats.js';
import { CHAT_PATH, chatBodies } from './workload.js';

/** Connections of the throughput run (issue 6). */
export const THROUGHPUT_CONNECTIONS = 32;

/** The row of the router run with `--workers 2` (issue 28), beside the default `router` row. */
export const WORKERS_ROW = 'router, 2 workers';

/** One target's numbers. */
export interface ThroughputRow {
  target: string;
  throughput: LoadResult;
  oneConnection: LoadResult;
  /** Requests each simulator saw during this target's runs. */
  perReplica: Record<string, number>;
  rssMiB?: number;
}

/** A target of the comparison; `skip` = why it is not measured here (its `start` is then unused). */
interface Target {
  readonly name: string;
  readonly skip?: string;
  readonly start?: () => Promise<{ url: string; pid?: number; stop(): Promise<void> }>;
}

/** A started target. */
interface Live {
  readonly name: string;
  readonly url: string;
  readonly pid?: number;
  stop(): Promise<void>;
  readonly throughput: LoadResult[];
  readonly oneConnection: LoadResult[];
  readonly perReplica: Record<string, number>;
}

async function requestsBySim(sims: readonly SimProcess[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const s of sims) out[s.name] = (await s.stats()).requests;
  return out;
}

/** One closed-loop run against `l`, counting what each simulator saw meanwhile. */
async function measure(ctx: BenchContext, l: Live, sims: readonly SimProcess[], bodies: string[], connections: number, durationS: number): Promise<LoadResult> {
  const before = await requestsBySim(sims);
  const r = await runClosedLoop(ctx, { url: l.url, path: CHAT_PATH, connections, durationS, bodies });
  const after = await requestsBySim(sims);
  for (const s of sims) l.perReplica[s.name] = (l.perReplica[s.name] ?? 0) + (after[s.name] ?? 0) - (before[s.name] ?? 0);
  return r;
}

function targets(ctx: BenchContext, sims: readonly SimProcess[]): Target[] {
  const ports = sims.map((s) => s.port);
  const { nginx, haproxy } = ctx.tools;
  return [
    { name: 'direct', start: () => Promise.resolve({ url: sims[0]?.url ?? '', stop: () => Promise.resolve() }) },
    { name: 'router', start: () => startRouter(ctx, sims) },
    { name: WORKERS_ROW, start: () => startRouter(ctx, sims, ['--workers', '2']) },
    nginx === null
      ? { name: 'nginx', skip: 'nginx is not installed: its row is skipped (`apt-get install -y nginx`).' }
      : { name: 'nginx', start: () => startNginx(ctx, nginx, ports) },
    haproxy === null
      ? { name: 'haproxy', skip: 'haproxy is not installed: its reference row is skipped (`apt-get install -y haproxy`).' }
      : { name: 'haproxy', start: () => startHaproxy(ctx, haproxy, ports) },
    { name: 'node pipe', start: () => startNodeProxy(ports) },
  ];
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const { plan } = ctx.options;
  const bodies = chatBodies(500, 1024);
  const notes: string[] = [];
  const sims = await startSims(ctx.options.sims, [], 'a');
  const live: Live[] = [];
  const rows: ThroughputRow[] = [];
  try {
    if (sims.length === 0) throw new Error('scenario a needs at least one simulator');
    for (const t of targets(ctx, sims)) {
      if (t.start === undefined) {
        notes.push(t.skip ?? `${t.name}: skipped`);
        continue;
      }
      try {
        const ep = await t.start();
        live.push({
          name: t.name,
          url: ep.url,
          stop: () => ep.stop(),
          throughput: [],
          oneConnection: [],
          perReplica: {},
          ...(ep.pid === undefined ? {} : { pid: ep.pid }),
        });
      } catch (e: unknown) {
        // The comparison rows are optional: a proxy that cannot start is reported, not fatal.
        if (t.name === 'direct' || t.name === 'router' || t.name === WORKERS_ROW) throw e;
        notes.push(`${t.name} could not be started, its row is skipped: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
      }
    }
    // Every target is up (idle ones cost nothing); rounds interleave them so that a change in the
    // machine's background load hits every row alike.
    const rounds = plan.rounds;
    const tputS = Math.max(1, Math.round(plan.throughputS / rounds));
    const oneS = Math.max(1, Math.round(plan.latency1S / rounds));
    for (const l of live) {
      ctx.log(`a: ${l.name}: warm-up ${plan.warmupS}s at ${THROUGHPUT_CONNECTIONS} connections`);
      await measure(ctx, l, sims, bodies, THROUGHPUT_CONNECTIONS, plan.warmupS);
      for (const s of sims) l.perReplica[s.name] = 0;
    }
    for (let r = 1; r <= rounds; r++) {
      for (const l of live) {
        ctx.log(`a: round ${r}/${rounds}: ${l.name}: ${tputS}s at ${THROUGHPUT_CONNECTIONS} connections`);
        l.throughput.push(await measure(ctx, l, sims, bodies, THROUGHPUT_CONNECTIONS, tputS));
      }
    }
    const rss = new Map<string, number>();
    for (const l of live) if ((l.name === 'router' || l.name === WORKERS_ROW) && l.pid !== undefined) rss.set(l.name, round(procStats(l.pid).rssMiB, 1));
    for (let r = 1; r <= rounds; r++) {
      for (const l of live) {
        ctx.log(`a: round ${r}/${rounds}: ${l.name}: ${oneS}s at 1 connection`);
        l.oneConnection.push(await measure(ctx, l, sims, bodies, 1, oneS));
      }
    }
    for (const l of live) {
      rows.push({
        target: l.name,
        throughput: combineLoads(l.throughput),
        oneConnection: combineLoads(l.oneConnection),
        perReplica: l.perReplica,
        ...(rss.has(l.name) ? { rssMiB: rss.get(l.name) } : {}),
      });
    }
    if (rounds > 1) {
      notes.push(
        `The targets ran interleaved in ${rounds} rounds (${tputS} s at ${THROUGHPUT_CONNECTIONS} connections, then ${oneS} s at 1 connection, per target per round), so background load on the shared machine hits every row alike; req/s = all requests ÷ all seconds, percentiles = median of the rounds' percentiles.`,
      );
    }
  } finally {
    for (const l of live) await l.stop();
    await stopSims(sims);
  }
  return summarizeThroughput(ctx, rows, bodies, notes);
}

function summarizeThroughput(ctx: BenchContext, rows: ThroughputRow[], bodies: string[], notes: string[]): ScenarioResult {
  const by = (name: string): ThroughputRow | undefined => rows.find((r) => r.target === name);
  const direct = by('direct');
  const router = by('router');
  const nginx = by('nginx');
  const ratio = (a?: ThroughputRow, b?: ThroughputRow): number => (a && b ? a.throughput.rps / b.throughput.rps : NaN);
  const routerVsDirect = ratio(router, direct);
  const routerVsNginx = ratio(router, nginx);
  const workers = by(WORKERS_ROW);
  const workersVsOne = ratio(workers, router);
  const workersVsNginx = ratio(workers, nginx);
  const added = (r?: ThroughputRow): number => (r && direct ? r.oneConnection.p50Ms - direct.oneConnection.p50Ms : NaN);
  const tool = rows[0]?.throughput.tool ?? 'wrk';
  if (tool === 'autocannon') notes.push('wrk is not installed: autocannon measured these rows (1 ms latency resolution: sub-ms differences are not visible).');
  notes.push(
    `Direct hits one simulator; the router and nginx spread the load over ${ctx.options.sims}. Bodies: ${bodies.length} sessions, ${Buffer.byteLength(bodies[0] ?? '')} bytes each, \`session_id\` as the last body field; simulators answer at once (no ITL).`,
  );
  notes.push(
    `nginx: ${NGINX_SETTINGS}. haproxy: ${HAPROXY_SETTINGS}. "node pipe" = bench/node-proxy.ts, the plainest node:http reverse proxy (keep-alive agent, round-robin, req.pipe/res.pipe, no body buffering or session logic): the ceiling of one Node process here, for calibration. Router: \`--log-level warn\` (no per-request log line), default policy (affinity).`,
  );
  const tput = {
    title: `(a) Throughput, ${THROUGHPUT_CONNECTIONS} connections, non-streaming ~1 KB chat (${tool})`,
    columns: ['target', 'req/s', 'p50 ms', 'p99 ms', 'errors', 'non-2xx', '× direct', 'requests per replica', 'RSS MiB'],
    rows: rows.map((r) => [
      r.target,
      fmt(r.throughput.rps, 0),
      fmt(r.throughput.p50Ms, 3),
      fmt(r.throughput.p99Ms, 3),
      String(r.throughput.errors),
      String(r.throughput.non2xx),
      fmt(direct ? r.throughput.rps / direct.throughput.rps : NaN, 2),
      perReplicaText(r.perReplica),
      r.rssMiB === undefined ? '' : fmt(r.rssMiB, 1),
    ]),
  };
  const lat = {
    title: '(a) Latency at 1 connection',
    columns: ['target', 'req/s', 'p50 ms', 'p99 ms', 'added p50 ms', 'added p99 ms'],
    rows: rows.map((r) => [
      r.target,
      fmt(r.oneConnection.rps, 0),
      fmt(r.oneConnection.p50Ms, 3),
      fmt(r.oneConnection.p99Ms, 3),
      r.target === 'direct' ? '' : fmtDelta(added(r), 3),
      r.target === 'direct' || !direct ? '' : fmtDelta(r.oneConnection.p99Ms - direct.oneConnection.p99Ms, 3),
    ]),
  };
  const ratios = {
    title: '(a) Ratios',
    columns: ['ratio', 'value'],
    rows: [
      ['router / direct', fmt(routerVsDirect, 3)],
      ['router / nginx', fmt(routerVsNginx, 3)],
      ['nginx / direct', fmt(ratio(nginx, direct), 3)],
      ['haproxy / direct', fmt(ratio(by('haproxy'), direct), 3)],
      ['node pipe / nginx', fmt(ratio(by('node pipe'), nginx), 3)],
      ['router / node pipe', fmt(ratio(router, by('node pipe')), 3)],
      [`${WORKERS_ROW} / router`, fmt(workersVsOne, 3)],
      [`${WORKERS_ROW} / nginx`, fmt(workersVsNginx, 3)],
    ],
  };
  const routerErrors = router ? router.throughput.errors + router.throughput.non2xx : NaN;
  const targets: TargetCheck[] = [
    {
      target: '(a) router throughput ≥ 0.4× nginx, zero errors',
      measured: `${fmt(routerVsNginx, 3)}× nginx, ${Number.isNaN(routerErrors) ? '—' : routerErrors} errors/non-2xx`,
      pass: Number.isNaN(routerVsNginx) ? null : routerVsNginx >= 0.4 && routerErrors === 0,
    },
    {
      target: '(b) router adds ≤ 0.3 ms p50 at 1 connection',
      measured: `${fmtDelta(added(router), 3)} ms${tool === 'autocannon' ? ' (autocannon: 1 ms resolution, not judged)' : ''}`,
      pass: Number.isNaN(added(router)) || tool === 'autocannon' ? null : added(router) <= 0.3,
    },
  ];
  const workersErrors = workers ? workers.throughput.errors + workers.throughput.non2xx + workers.oneConnection.errors + workers.oneConnection.non2xx : NaN;
  targets.push(
    {
      target: '(a) 2 workers: throughput ≥ 1.5× 1 worker and ≥ 0.4× nginx, zero errors',
      measured: `${fmt(workersVsOne, 3)}× 1 worker, ${fmt(workersVsNginx, 3)}× nginx, ${Number.isNaN(workersErrors) ? '—' : workersErrors} errors/non-2xx`,
      pass: Number.isNaN(workersVsOne) ? null : workersVsOne >= 1.5 && (Number.isNaN(workersVsNginx) || workersVsNginx >= 0.4) && workersErrors === 0,
    },
    {
      target: '(a) 2 workers add ≤ 0.2 ms p50 at 1 connection',
      measured: `${fmtDelta(added(workers), 3)} ms${tool === 'autocannon' ? ' (autocannon: 1 ms resolution, not judged)' : ''}`,
      pass: Number.isNaN(added(workers)) || tool === 'autocannon' ? null : added(workers) <= 0.2,
    },
  );
  notes.push(
    `"${WORKERS_ROW}" = the same router with \`--workers 2\` (a primary and two forked workers relaying /v1/); its RSS is the three processes together.`,
  );
  const names = rows.map((r) => r.target);
  return {
    id: 'a-throughput',
    title: 'Throughput and 1-connection latency',
    tables: [tput, lat, ratios],
    targets,
    notes,
    charts: [
      {
        file: 'a-throughput',
        title: `(a) Throughput at ${THROUGHPUT_CONNECTIONS} connections`,
        unit: 'req/s',
        categories: names,
        series: [{ name: 'req/s', values: rows.map((r) => r.throughput.rps) }],
      },
      {
        file: 'a-latency-1conn',
        title: '(a) Latency at 1 connection',
        unit: 'ms',
        categories: names,
        series: [
          { name: 'p50', values: rows.map((r) => r.oneConnection.p50Ms) },
          { name: 'p99', values: rows.map((r) => r.oneConnection.p99Ms) },
        ],
      },
    ],
    data: {
      connections: THROUGHPUT_CONNECTIONS,
      sims: ctx.options.sims,
      bodyBytes: Buffer.byteLength(bodies[0] ?? ''),
      sessions: bodies.length,
      rows,
      ratios: { routerVsDirect, routerVsNginx, nginxVsDirect: ratio(nginx, direct), workersVsOne, workersVsNginx },
    },
  };
}

/** Scenario (a). */
export const throughputScenario: Scenario = { key: 'a', id: 'a-throughput', title: 'Throughput and 1-connection latency', run };
