/**
 * Scenario (b): a fixed offered load (500 req/s, open loop, evenly spaced) of the same ~1 KB
 * chat bodies, for direct, router and nginx; the latency the proxies add at moderate load.
 */
import type { SimProcess } from '../test/support/sim-process.js';
import { startNginx } from './nginx.js';
import { runOpenLoop, type OpenLoopResult } from './open-loop.js';
import { startRouter, startSims, stopSims } from './processes.js';
import type { BenchContext, Scenario, ScenarioResult } from './scenario.js';
import { fmt, fmtDelta, roundSummary } from './stats.js';
import { CHAT_PATH, chatBodies } from './workload.js';

interface FixedRow {
  target: string;
  result: OpenLoopResult;
}

async function measure(ctx: BenchContext, target: string, base: string, bodies: string[]): Promise<FixedRow> {
  const { plan } = ctx.options;
  const url = new URL(CHAT_PATH, base);
  const body = (i: number): string => bodies[i % bodies.length] ?? '';
  ctx.log(`b: ${target}: warm-up ${plan.fixedWarmupS}s, then ${plan.fixedLoadS}s at ${plan.fixedRate} req/s`);
  await runOpenLoop({ url, rate: plan.fixedRate, durationS: plan.fixedWarmupS, body });
  const result = await runOpenLoop({ url, rate: plan.fixedRate, durationS: plan.fixedLoadS, body });
  return { target, result };
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const bodies = chatBodies(500, 1024);
  const notes: string[] = [];
  const sims: SimProcess[] = await startSims(ctx.options.sims, [], 'b');
  const rows: FixedRow[] = [];
  try {
    const first = sims[0];
    if (first === undefined) throw new Error('scenario b needs at least one simulator');
    rows.push(await measure(ctx, 'direct', first.url, bodies));
    const router = await startRouter(ctx, sims);
    try {
      rows.push(await measure(ctx, 'router', router.url, bodies));
    } finally {
      await router.stop();
    }
    if (ctx.tools.nginx === null) notes.push('nginx is not installed: its row is skipped.');
    else {
      const nginx = await startNginx(
        ctx,
        ctx.tools.nginx,
        sims.map((s) => s.port),
      );
      try {
        rows.push(await measure(ctx, 'nginx', nginx.url, bodies));
      } finally {
        await nginx.stop();
      }
    }
  } finally {
    await stopSims(sims);
  }
  const direct = rows.find((r) => r.target === 'direct')?.result;
  const router = rows.find((r) => r.target === 'router')?.result;
  const addedP50 = (r: OpenLoopResult): number => (direct ? r.latency.p50 - direct.latency.p50 : NaN);
  const addedP99 = (r: OpenLoopResult): number => (direct ? r.latency.p99 - direct.latency.p99 : NaN);
  const plan = ctx.options.plan;
  notes.push(
    `Open loop: a request leaves every ${fmt(1000 / plan.fixedRate, 1)} ms whether or not earlier ones were answered (Node http client, keep-alive agent, up to 512 sockets); latency is from handing the request to http.request to the last body byte, measured with performance.now(). "gen lag p99" is how late the generator itself sent (same for every row; it is not in the latency).`,
  );
  const routerP99 = router ? addedP99(router) : NaN;
  return {
    id: 'b-fixed-load',
    title: `Fixed offered load (${plan.fixedRate} req/s)`,
    tables: [
      {
        title: `(b) ${plan.fixedRate} req/s offered for ${plan.fixedLoadS} s, non-streaming ~1 KB chat`,
        columns: [
          'target',
          'sent',
          'ok',
          'errors',
          'non-2xx',
          'achieved req/s',
          'p50 ms',
          'p90 ms',
          'p99 ms',
          'max ms',
          'added p50 ms',
          'added p99 ms',
          'gen lag p99 ms',
        ],
        rows: rows.map(({ target, result: r }) => [
          target,
          String(r.sent),
          String(r.ok),
          String(r.errors),
          String(r.non2xx),
          fmt(r.achievedRate, 0),
          fmt(r.latency.p50, 3),
          fmt(r.latency.p90, 3),
          fmt(r.latency.p99, 3),
          fmt(r.latency.max, 3),
          target === 'direct' ? '' : fmtDelta(addedP50(r), 3),
          target === 'direct' ? '' : fmtDelta(addedP99(r), 3),
          fmt(r.lag.p99, 3),
        ]),
      },
    ],
    targets: [
      {
        target: `(b) router adds ≤ 2 ms p99 at ${plan.fixedRate} req/s offered`,
        measured: `${fmtDelta(routerP99, 3)} ms (p50 ${router ? fmtDelta(addedP50(router), 3) : '—'} ms), ${router ? router.errors + router.non2xx : '—'} errors`,
        pass: Number.isNaN(routerP99) || router === undefined ? null : routerP99 <= 2 && router.errors + router.non2xx === 0,
      },
    ],
    charts: [
      {
        file: 'b-fixed-load',
        title: `(b) Latency at ${plan.fixedRate} req/s offered`,
        unit: 'ms',
        categories: rows.map((r) => r.target),
        series: [
          { name: 'p50', values: rows.map((r) => r.result.latency.p50) },
          { name: 'p99', values: rows.map((r) => r.result.latency.p99) },
        ],
      },
    ],
    notes,
    data: {
      rate: plan.fixedRate,
      durationS: plan.fixedLoadS,
      rows: rows.map(({ target, result: { latencies: _raw, ...r } }) => ({ target, ...r, latency: roundSummary(r.latency), lag: roundSummary(r.lag) })),
    },
  };
}

/** Scenario (b). */
export const fixedLoadScenario: Scenario = { key: 'b', id: 'b-fixed-load', title: 'Fixed offered load', run };
