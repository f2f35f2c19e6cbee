/**
 * Scenario (c): streaming. Part one: sequential streams of 20 chunks 50 ms apart, direct vs
 * router vs nginx, measuring from the client the time to first byte and the gaps between chunks.
 * Part two: 1,000 concurrent long streams through the router (RSS, fds, all completed?).
 */
import http from 'node:http';
import { runLongStreams, type LongStreamsResult } from './long-streams.js';
import { startNginx } from './nginx.js';
import { startHaproxy, startNodeProxy } from './reference-proxies.js';
import { WORKERS_ROW } from './scenario-throughput.js';
import { startRouter, startSims, stopSims } from './processes.js';
import type { BenchContext, Scenario, ScenarioResult, TargetCheck } from './scenario.js';
import { fmt, fmtDelta, roundSummary, seededRandom, summarize, type Summary } from './stats.js';
import { overheadMeansMs, overheadSnapshot } from './router-metrics.js';
import { openStream } from './stream-client.js';
import { CHAT_PATH, hexId, streamBody } from './workload.js';

/** Client-side timings of one target's sequential streams (milliseconds). */
export interface StreamRow {
  target: string;
  streams: number;
  failed: number;
  /** Request sent → response headers. */
  headers: Summary;
  ttfb: Summary;
  gap: Summary;
}

const WARMUP_STREAMS = 2;

async function sequential(ctx: BenchContext, target: string, base: string): Promise<StreamRow> {
  const { plan } = ctx.options;
  const url = new URL(CHAT_PATH, base);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const random = seededRandom(2);
  const headers: number[] = [];
  const ttfb: number[] = [];
  const gaps: number[] = [];
  let failed = 0;
  ctx.log(`c: ${target}: ${plan.streamCount} sequential streams of ${plan.streamTokens} chunks, ${plan.streamItlMs} ms apart`);
  for (let i = 0; i < WARMUP_STREAMS + plan.streamCount; i++) {
    const t = await openStream(agent, url, streamBody(plan.streamTokens, hexId(random))).finished;
    const ok = t.status === 200 && t.complete && t.sawDone && t.eventsAt.length >= plan.streamTokens;
    if (i < WARMUP_STREAMS) continue;
    if (!ok) {
      failed++;
      continue;
    }
    headers.push(t.headersAt - t.startAt);
    ttfb.push(t.firstByteAt - t.startAt);
    // Gaps between the token events only (finish chunk and [DONE] follow the last token at once).
    for (let k = 1; k < plan.streamTokens; k++) gaps.push((t.eventsAt[k] ?? NaN) - (t.eventsAt[k - 1] ?? NaN));
  }
  agent.destroy();
  return { target, streams: plan.streamCount, failed, headers: summarize(headers), ttfb: summarize(ttfb), gap: summarize(gaps) };
}

/** A started proxy in front of the simulators. */
interface Proxy {
  readonly url: string;
  stop(): Promise<void>;
}

/** The proxies measured after `direct`, in order; `skip` = why a reference row is not measured here. */
function proxies(
  ctx: BenchContext,
  ports: readonly number[],
  sims: Parameters<typeof startRouter>[1],
): { name: string; skip?: string; start?: () => Promise<Proxy> }[] {
  const { nginx, haproxy } = ctx.tools;
  return [
    { name: 'router', start: () => startRouter(ctx, sims) },
    { name: WORKERS_ROW, start: () => startRouter(ctx, sims, ['--workers', '2']) },
    nginx === null
      ? { name: 'nginx', skip: 'nginx is not installed: its streaming row is skipped.' }
      : { name: 'nginx', start: () => startNginx(ctx, nginx, ports) },
    haproxy === null
      ? { name: 'haproxy', skip: 'haproxy is not installed: its streaming row is skipped.' }
      : { name: 'haproxy', start: () => startHaproxy(ctx, haproxy, ports, true) },
    { name: 'node pipe', start: () => startNodeProxy(ports) },
  ];
}

async function runSequential(ctx: BenchContext, notes: string[]): Promise<StreamRow[]> {
  const { plan } = ctx.options;
  const sims = await startSims(ctx.options.sims, ['--itl-ms', String(plan.streamItlMs)], 'c');
  const rows: StreamRow[] = [];
  try {
    const first = sims[0];
    if (first === undefined) throw new Error('scenario c needs at least one simulator');
    rows.push(await sequential(ctx, 'direct', first.url));
    for (const p of proxies(
      ctx,
      sims.map((s) => s.port),
      sims,
    )) {
      if (p.start === undefined) {
        notes.push(p.skip ?? `${p.name}: skipped`);
        continue;
      }
      const proxy = await p.start();
      try {
        const before = p.name === 'router' ? await overheadSnapshot(proxy.url).catch(() => ({})) : {};
        rows.push(await sequential(ctx, p.name, proxy.url));
        if (p.name === 'router') {
          const means = overheadMeansMs(before, await overheadSnapshot(proxy.url).catch(() => ({})));
          const shown = Object.entries(means).map(([phase, ms]) => `${phase} ${fmt(ms, 3)} ms`);
          notes.push(
            shown.length === 0
              ? "The router's own overhead histogram (affinity_router_overhead_seconds) was not found in its /metrics."
              : `The router's own view of these streams (affinity_router_overhead_seconds, mean per request): ${shown.join(', ')}; what the client sees beyond that is spent before the router's request listener runs or after it hands bytes on (HTTP parsing, event loop, kernel).`,
          );
        }
      } finally {
        await proxy.stop();
      }
    }
  } finally {
    await stopSims(sims);
  }
  return rows;
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const notes: string[] = [];
  const rows = await runSequential(ctx, notes);
  const long: LongStreamsResult = await runLongStreams(ctx);
  return summarizeStreaming(ctx, rows, long, notes);
}

function summarizeStreaming(ctx: BenchContext, rows: StreamRow[], long: LongStreamsResult, notes: string[]): ScenarioResult {
  const { plan } = ctx.options;
  const direct = rows.find((r) => r.target === 'direct');
  const router = rows.find((r) => r.target === 'router');
  const d = (f: (r: StreamRow) => number, r?: StreamRow): number => (r && direct ? f(r) - f(direct) : NaN);
  const addedTtfbP50 = d((r) => r.ttfb.p50, router);
  const addedGapP99 = d((r) => r.gap.p99, router);
  const workers = rows.find((r) => r.target === WORKERS_ROW);
  const workersTtfbP50 = d((r) => r.ttfb.p50, workers);
  notes.push(
    `headers = request handed to http.request → response headers; TTFB = → first body byte (the first token event; the simulator has no TTFT here). Gaps = arrival time between consecutive token events, ${plan.streamTokens - 1} per stream; the simulator's own timer jitter is in every row, so "added" compares like with like. ${WARMUP_STREAMS} warm-up streams per target are not counted; one keep-alive connection per target.`,
  );
  notes.push(
    `${long.streams} concurrent streams: ${ctx.options.sims} simulators with --itl-ms ${long.itlMs}, ${long.tokens} tokens each, opened at once from one client (http.Agent maxSockets Infinity, no keep-alive); RSS and fds sampled from /proc every 250 ms while every stream was open.`,
  );
  const targets: TargetCheck[] = [
    {
      target: '(c) router adds ≤ 1 ms to time-to-first-byte (p50)',
      measured: `${fmtDelta(addedTtfbP50, 3)} ms (p99 ${fmtDelta(
        d((r) => r.ttfb.p99, router),
        3,
      )} ms)`,
      pass: Number.isNaN(addedTtfbP50) ? null : addedTtfbP50 <= 1,
    },
    {
      target: '(c) 2 workers add ≤ 1 ms to time-to-first-byte (p50), no failed stream',
      measured: `${fmtDelta(workersTtfbP50, 3)} ms (p99 ${fmtDelta(
        d((r) => r.ttfb.p99, workers),
        3,
      )} ms), ${workers?.failed ?? '—'} failed`,
      pass: Number.isNaN(workersTtfbP50) ? null : workersTtfbP50 <= 1 && workers?.failed === 0,
    },
    {
      target: '(c) router adds ≤ 1 ms p99 between chunks',
      measured: `${fmtDelta(addedGapP99, 3)} ms`,
      pass: Number.isNaN(addedGapP99) ? null : addedGapP99 <= 1,
    },
    {
      target: `(c) ${long.streams} concurrent streams in < 300 MB router RSS, all complete with [DONE]`,
      measured: `peak ${fmt(long.peakRssMiB, 1)} MiB, ${long.peakFds} fds, ${long.completedWithDone}/${long.streams} with [DONE]`,
      pass: long.peakRssMiB * 1.048576 < 300 && long.completedWithDone === long.streams,
    },
  ];
  return {
    id: 'c-streaming',
    title: 'Streaming',
    tables: [
      {
        title: `(c) ${plan.streamCount} sequential streams, ${plan.streamTokens} chunks, --itl-ms ${plan.streamItlMs}`,
        columns: [
          'target',
          'failed',
          'headers p50 ms',
          'TTFB p50 ms',
          'TTFB p99 ms',
          'added TTFB p50',
          'added TTFB p99',
          'gap p50 ms',
          'gap p99 ms',
          'gap max ms',
          'added gap p99',
        ],
        rows: rows.map((r) => [
          r.target,
          String(r.failed),
          fmt(r.headers.p50, 3),
          fmt(r.ttfb.p50, 3),
          fmt(r.ttfb.p99, 3),
          r.target === 'direct'
            ? ''
            : fmtDelta(
                d((x) => x.ttfb.p50, r),
                3,
              ),
          r.target === 'direct'
            ? ''
            : fmtDelta(
                d((x) => x.ttfb.p99, r),
                3,
              ),
          fmt(r.gap.p50, 3),
          fmt(r.gap.p99, 3),
          fmt(r.gap.max, 3),
          r.target === 'direct'
            ? ''
            : fmtDelta(
                d((x) => x.gap.p99, r),
                3,
              ),
        ]),
      },
      {
        title: `(c) ${long.streams} concurrent long streams through the router`,
        columns: ['idle RSS MiB', 'idle fds', 'peak RSS MiB', 'peak fds', 'all open after s', 'completed with [DONE]', 'failed', 'RSS after MiB'],
        rows: [
          [
            fmt(long.idleRssMiB, 1),
            String(long.idleFds),
            fmt(long.peakRssMiB, 1),
            String(long.peakFds),
            fmt(long.openS, 2),
            `${long.completedWithDone}/${long.streams}`,
            String(long.failed),
            fmt(long.rssAfterMiB, 1),
          ],
        ],
      },
    ],
    targets,
    charts: [
      {
        file: 'c-ttfb',
        title: '(c) Stream time to first byte',
        unit: 'ms',
        categories: rows.map((r) => r.target),
        series: [
          { name: 'p50', values: rows.map((r) => r.ttfb.p50) },
          { name: 'p99', values: rows.map((r) => r.ttfb.p99) },
        ],
      },
      {
        file: 'c-long-streams-rss',
        title: `(c) Router RSS with ${long.streams} open streams`,
        unit: 'MiB',
        categories: ['idle', `${long.streams} streams open`],
        series: [{ name: 'RSS', values: [long.idleRssMiB, long.peakRssMiB] }],
        line: { value: 300 / 1.048576, label: '300 MB target' },
      },
    ],
    notes: [...notes, ...(long.failures.length > 0 ? [`First stream failures: ${long.failures.join('; ')}`] : [])],
    data: {
      sequential: rows.map((r) => ({ ...r, headers: roundSummary(r.headers), ttfb: roundSummary(r.ttfb), gap: roundSummary(r.gap) })),
      long,
    },
  };
}

/** Scenario (c). */
export const streamingScenario: Scenario = { key: 'c', id: 'c-streaming', title: 'Streaming', run };
