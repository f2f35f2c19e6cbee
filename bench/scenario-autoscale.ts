/**
 * Scenario (g): the autoscaler under a step load (issue 17, acceptance 6). One host with three
 * device slots whose replicas are simulators the router launches; streamed chat requests at a base
 * rate, then four times that rate, then nothing. Run twice with the same schedule: the autoscaled
 * pool (`min 1, max 3`) and, as the baseline of the same run, a fixed pool of three replicas (what
 * an operator without an autoscaler keeps to survive the step). Sampled every second: pool size,
 * in-flight requests per routable replica, and the client's time to first byte (TTFT) p99 per
 * 5-second bucket. The chart is a line chart over time (svg-lines.ts), written by the scenario.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { simHost } from '../test/support/fleet.js';
import { freePortRange } from '../test/support/router-process.js';
import { freePort } from '../test/support/sim-process.js';
import { loadAgent } from './open-loop.js';
import { answers, stopChild, track, waitUntil } from './processes.js';
import type { BenchContext, Scenario, ScenarioResult } from './scenario.js';
import { fmt, quantileSorted, round } from './stats.js';
import { openStream, type StreamTiming } from './stream-client.js';
import { renderLineChart, type LineSeries } from './svg-lines.js';
import { CHAT_PATH, streamBody } from './workload.js';
import { MAIN_ENTRY } from './bench-options.js';

const TOKEN = 'bench-admin-token';
/** Simulator: 30 ms to the first token, 16 tokens 20 ms apart (~0.35 s a request), 4 generated at once. */
const SIM_ARGS = ['--ttft-base-ms', '30', '--itl-ms', '20', '--max-running', '4'];
const TOKENS = 16;
const BUCKET_S = 5;

interface Phase {
  readonly name: string;
  readonly seconds: number;
  readonly rate: number;
}

interface Sample {
  /** Seconds since the load started. */
  readonly t: number;
  /** Launched replicas holding a slot (starting and draining ones included): the cards in use. */
  readonly slots: number;
  /** Routable replicas. */
  readonly routable: number;
  readonly inflightPerReplica: number;
  readonly desired: number | null;
}

interface RunResult {
  readonly label: string;
  readonly samples: Sample[];
  readonly requests: Array<{ t: number; ttftMs: number; ok: boolean }>;
}

/** The schedule: base rate, ×4 step, idle. */
function phases(ctx: BenchContext): Phase[] {
  const q = ctx.options.quick;
  const base = 3;
  return [
    { name: 'base', seconds: q ? 10 : 30, rate: base },
    { name: 'step ×4', seconds: q ? 40 : 120, rate: base * 4 },
    { name: 'idle', seconds: q ? 40 : 90, rate: 0 },
  ];
}

async function startFleetRouter(
  ctx: BenchContext,
  label: string,
  autoscale: Record<string, number> | undefined,
): Promise<{ url: string; stop(): Promise<void> }> {
  const base = await freePortRange(3);
  const config = { hosts: [simHost('g', [0, 1, 2], base, SIM_ARGS)], ...(autoscale ? { autoscale } : {}) };
  const file = join(ctx.tmpDir, `autoscale-${label}.json`);
  writeFileSync(file, JSON.stringify(config, null, 2));
  const port = await freePort();
  const initial = autoscale ? '1' : '3';
  const args = [MAIN_ENTRY, '--config', file, '--host', '127.0.0.1', '--port', String(port), '--log-level', 'warn'];
  args.push('--initial-replicas', initial, '--health-interval', '0.5', '--stop-grace', '5', '--drain-timeout', '30');
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ROUTER_ADMIN_TOKEN: TOKEN } });
  track(child);
  const url = `http://127.0.0.1:${port}`;
  await waitUntil(() => answers(`${url}/readyz`), 30_000, `router ${label} ready`);
  await waitUntil(async () => (await replicaRows(url)).filter((r) => r.ready).length === Number(initial), 30_000, `${initial} ready replicas`);
  return { url, stop: () => stopChild(child, 40_000) };
}

interface Row {
  ready: boolean;
  draining: boolean;
  state: string;
  outstanding: number;
}

async function getJson(url: string): Promise<Record<string, unknown>> {
  const r = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
  return (await r.json()) as Record<string, unknown>;
}

async function replicaRows(url: string): Promise<Row[]> {
  return ((await getJson(`${url}/replicas`))['replicas'] as Row[]) ?? [];
}

async function sample(url: string, t: number): Promise<Sample> {
  const [rows, fleet] = await Promise.all([replicaRows(url), getJson(`${url}/fleet`)]);
  const routable = rows.filter((r) => r.ready && !r.draining).length;
  const inflight = rows.reduce((s, r) => s + r.outstanding, 0);
  const pool = ((fleet['autoscaler'] as { pools: Array<{ desired: number | null }> }).pools ?? [])[0];
  return { t, slots: rows.length, routable, inflightPerReplica: routable > 0 ? inflight / routable : NaN, desired: pool?.desired ?? null };
}

/** Plays the schedule against `url`, sampling every second; waits for the last answer. */
async function play(ctx: BenchContext, label: string, url: string): Promise<RunResult> {
  const agent = loadAgent();
  const target = new URL(CHAT_PATH, url);
  const samples: Sample[] = [];
  const requests: RunResult['requests'] = [];
  const pending: Array<Promise<void>> = [];
  const t0 = performance.now();
  const total = phases(ctx).reduce((s, p) => s + p.seconds, 0);
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const t = (performance.now() - t0) / 1000;
      samples.push(await sample(url, round(t, 2)).catch(() => ({ t, slots: NaN, routable: NaN, inflightPerReplica: NaN, desired: null })));
      await new Promise((r) => setTimeout(r, Math.max(0, 1000 - ((performance.now() - t0) % 1000))));
    }
  })();
  let i = 0;
  let start = 0;
  for (const p of phases(ctx)) {
    ctx.log(`(g) ${label}: ${p.name} at ${p.rate} req/s for ${p.seconds} s`);
    const n = Math.round(p.rate * p.seconds);
    for (let k = 0; k < n; k++) {
      const due = t0 + (start + k / p.rate) * 1000;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const s = openStream(agent, target, streamBody(TOKENS, `g-${i++ % 60}`), 60_000);
      pending.push(
        s.finished.then((timing: StreamTiming) => {
          requests.push({ t: (timing.startAt - t0) / 1000, ttftMs: timing.firstByteAt - timing.startAt, ok: timing.status === 200 && timing.sawDone });
        }),
      );
    }
    start += p.seconds;
    const end = t0 + start * 1000;
    if (end > performance.now()) await new Promise((r) => setTimeout(r, end - performance.now()));
  }
  await Promise.all(pending);
  const extra = t0 + (total + 2) * 1000 - performance.now();
  if (extra > 0) await new Promise((r) => setTimeout(r, extra));
  sampling = false;
  await sampler;
  agent.destroy();
  return { label, samples, requests };
}

/** TTFT p99 per bucket of request start time. */
function ttftP99(run: RunResult, totalS: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let b = 0; b < totalS; b += BUCKET_S) {
    const v = run.requests
      .filter((r) => r.ok && r.t >= b && r.t < b + BUCKET_S)
      .map((r) => r.ttftMs)
      .sort((x, y) => x - y);
    out.push([b + BUCKET_S / 2, v.length > 0 ? quantileSorted(v, 0.99) : NaN]);
  }
  return out;
}

function summary(run: RunResult, ph: Phase[]): string[] {
  const step = { from: ph[0].seconds, to: ph[0].seconds + ph[1].seconds };
  const inStep = run.requests.filter((r) => r.ok && r.t >= step.from && r.t < step.to).map((r) => r.ttftMs);
  const all = run.requests.filter((r) => r.ok).map((r) => r.ttftMs);
  const sorted = (v: number[]): number[] => [...v].sort((a, b) => a - b);
  const slotSeconds = run.samples.reduce((s, x) => s + (Number.isFinite(x.slots) ? x.slots : 0), 0);
  const reached3 = run.samples.find((s) => s.routable >= 3 && s.t >= step.from);
  const back1 = run.samples.find((s) => s.t >= step.to && s.slots === 1);
  return [
    run.label,
    String(run.requests.length),
    String(run.requests.filter((r) => !r.ok).length),
    fmt(slotSeconds, 0),
    String(Math.max(...run.samples.map((s) => (Number.isFinite(s.slots) ? s.slots : 0)))),
    fmt(quantileSorted(sorted(all), 0.5), 1),
    fmt(quantileSorted(sorted(inStep), 0.99), 1),
    reached3 ? fmt(reached3.t - step.from, 1) : '-',
    back1 ? fmt(back1.t - step.to, 1) : '-',
  ];
}

export const autoscaleScenario: Scenario = {
  key: 'g',
  id: 'g-autoscale',
  title: 'Autoscaling under a step load: pool size, in-flight per replica, TTFT p99 over time',
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const q = ctx.options.quick;
    const ph = phases(ctx);
    const totalS = ph.reduce((s, p) => s + p.seconds, 0);
    const settings = { min: 1, max: 3, target_inflight: 2, interval: 1, up_after: q ? 3 : 5, down_after: q ? 8 : 15 };
    const runs: RunResult[] = [];
    for (const [label, autoscale] of [
      ['autoscaled 1..3', settings],
      ['fixed 3', undefined],
    ] as const) {
      const router = await startFleetRouter(ctx, label.replace(/\W+/g, '-'), autoscale);
      try {
        runs.push(await play(ctx, label, router.url));
      } finally {
        await router.stop();
      }
    }
    const marks = ph.slice(1).map((p, i) => ({ x: ph.slice(0, i + 1).reduce((s, x) => s + x.seconds, 0), label: p.name }));
    const line = (f: (s: Sample) => number) => (r: RunResult) => ({ name: r.label, points: r.samples.map((s) => [s.t, f(s)] as [number, number]) });
    const chart = {
      file: 'g-autoscale',
      title: `(g) Step load ${ph[0].rate} → ${ph[1].rate} → 0 req/s${q ? ' (quick)' : ''}`,
      xLabel: 'seconds since the load started',
      marks,
      panels: [
        { title: 'Launched replicas (slots held)', unit: 'replicas', series: runs.map(line((s) => s.slots)) },
        { title: 'In flight per routable replica', unit: 'requests', series: runs.map(line((s) => s.inflightPerReplica)) },
        { title: `Client TTFT p99 per ${BUCKET_S} s`, unit: 'ms', series: runs.map((r): LineSeries => ({ name: r.label, points: ttftP99(r, totalS) })) },
      ],
    };
    mkdirSync(ctx.options.chartsDir, { recursive: true });
    writeFileSync(join(ctx.options.chartsDir, `${chart.file}.svg`), renderLineChart(chart));
    const auto = summary(runs[0], ph);
    const grew = auto[7] !== '-';
    const shrank = auto[8] !== '-';
    return {
      id: 'g-autoscale',
      title: autoscaleScenario.title,
      tables: [
        {
          title: `(g) ${ph.map((p) => `${p.name} ${p.rate} req/s × ${p.seconds} s`).join(', ')}; autoscale ${JSON.stringify(settings)}`,
          columns: [
            'pool',
            'requests',
            'failed',
            'slot-seconds',
            'max replicas',
            'TTFT p50 ms',
            'TTFT p99 in the step ms',
            's to 3 routable',
            's back to 1 after the step',
          ],
          rows: runs.map((r) => summary(r, ph)),
        },
      ],
      targets: [
        {
          target: '(g) the pool grows to 3 in the step and returns to 1 when idle, every request answered',
          measured: `${grew ? `3 routable ${auto[7]} s into the step` : 'never 3 routable'}, ${shrank ? `back to 1 ${auto[8]} s after it` : 'never back to 1'}, ${auto[2]} failed`,
          pass: grew && shrank && auto[2] === '0',
        },
      ],
      charts: [],
      notes: [
        `Chart: ![(g) step load](${ctx.options.chartsLink}/${chart.file}.svg) (a line chart; the scenario writes it).`,
        'slot-seconds: the sum over 1-second samples of launched replicas holding a slot (the card time the pool used).',
        'The baseline is the same schedule on a fixed pool of 3 launched replicas, measured in the same run.',
      ],
      data: { settings, phases: ph, runs: runs.map((r) => ({ label: r.label, samples: r.samples, ttftP99: ttftP99(r, totalS), requests: r.requests.length })) },
    };
  },
};
