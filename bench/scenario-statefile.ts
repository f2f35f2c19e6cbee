/**
 * Scenario (s): the `--state-file` with 1,000,000 pinned sessions (issue 13, build item 4).
 *  1. The writer alone (statefile-child.ts): the old and the new way of writing the same
 *     1,000,000 pins, and how long each holds the event loop.
 *  2. Routers (statefile-routers.ts): the same open-loop load, in which every request is a new
 *     session (so pins change all the time and are flushed to the journal every second), in alternating
 *     rounds through a router without `--state-file` (the baseline), one that adopted 1,000,000
 *     pins from its state file at start, and a control holding the same pins that cannot write.
 *     Each owns one launched simulator, so the pins are on a replica the state file records.
 *     Measured: request latency, and each router's event-loop lag and CPU from its /metrics.
 */
import { readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runOpenLoop, type OpenLoopResult } from './open-loop.js';
import { isObject, runReportChild } from './processes.js';
import type { BenchContext, Scenario, ScenarioResult } from './scenario.js';
import type { StateFileChildReport } from './statefile-child.js';
import { adoptedRouter, admin, fleetConfig, kill, loopSample, replicaPid, scrape, startRouter, type Router } from './statefile-routers.js';
import { fmt, roundSummary } from './stats.js';
import { CHAT_PATH, chatBodies } from './workload.js';
import { journalPathOf } from '../src/modules/fleet/state-journal.js';

/** Compiled writer-alone child (statefile-child.ts). */
const STATEFILE_CHILD = join(dirname(fileURLToPath(import.meta.url)), 'statefile-child.js');
/** Writes per way in the writer-alone child. */
const CHILD_WRITES = 5;
const LAG_TARGET_MS = 20;
const P99_TARGET_RATIO = 1.2;

/** One router's timed windows, one per round. */
interface Row {
  label: string;
  router: Router;
  stateFile?: string;
  prefix: string;
  windows: Window[];
}

interface Window {
  result: OpenLoopResult;
  /** prom-client's reading (10 ms resolution). */
  lagMaxMs: number;
  lagP99Ms: number;
  /** The 1 ms monitor preloaded into the router (loop-probe.ts). */
  loopMaxMs: number;
  loopP99Ms: number;
  /** Router CPU seconds per second of the window (all threads). */
  cpu: number;
  pins: number;
  flushes: number;
}

const TEMPLATE = chatBodies(1, 1024, 7)[0] ?? '';
const TEMPLATE_ID = /"session_id":"([0-9a-f]+)"/.exec(TEMPLATE)?.[1] ?? '';

/** Bodies with a new session each: 32-character ids like the router's own, distinct per router and phase. */
const newSessions =
  (tag: string) =>
  (i: number): string =>
    TEMPLATE.replace(TEMPLATE_ID, `${tag}${i.toString(16).padStart(32 - tag.length, '0')}`);

/** One timed window on `row`'s router; counts the writes of the state file and its journal meanwhile. */
async function measure(ctx: BenchContext, row: Row, durationS: number, tag: string): Promise<Window> {
  const { plan } = ctx.options;
  const { router, stateFile } = row;
  const mtimes = new Set<string>();
  const files = stateFile === undefined ? [] : [stateFile, journalPathOf(stateFile)];
  const look = (): void => {
    for (const f of files) mtimes.add(`${f}@${statSync(f, { throwIfNoEntry: false })?.mtimeMs ?? 'none'}`);
  };
  const watch = stateFile === undefined ? undefined : setInterval(look, 50);
  look();
  const before = await scrape(router.url);
  await loopSample(router);
  const t0 = performance.now();
  const result = await runOpenLoop({ url: new URL(CHAT_PATH, router.url), rate: plan.fixedRate, durationS, body: newSessions(tag) });
  const loop = await loopSample(router);
  const after = await scrape(router.url);
  const cpu = (after.cpuS - before.cpuS) / ((performance.now() - t0) / 1000);
  if (watch !== undefined) clearInterval(watch);
  const pins = ((await admin(router.url, '/sessions')) as { total: number }).total;
  return {
    result,
    lagMaxMs: after.lagMaxMs,
    lagP99Ms: after.lagP99Ms,
    loopMaxMs: loop.maxMs,
    loopP99Ms: loop.p99Ms,
    cpu,
    pins,
    flushes: Math.max(0, mtimes.size - files.length),
  };
}

/** Runs statefile-child.ts: the old and the new writer alone with `pins` pins. */
function writerAlone(ctx: BenchContext, pins: number): Promise<StateFileChildReport> {
  return runReportChild(STATEFILE_CHILD, [String(pins), String(CHILD_WRITES), join(ctx.tmpDir, 'writer-alone')], isObject<StateFileChildReport>);
}

const median = (xs: readonly number[]): number => {
  const a = [...xs].sort((x, y) => x - y);
  return a.length === 0 ? NaN : a.length % 2 === 1 ? a[(a.length - 1) / 2] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2;
};

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const { plan } = ctx.options;
  const n = plan.sessions;
  // Short windows, many rounds: background load on a shared machine comes and goes within seconds.
  const rounds = ctx.options.quick ? 2 : 6;
  const windowS = Math.max(1, Math.round(plan.fixedLoadS / rounds));
  const common = ['--initial-replicas', '1', '--max-sessions', String(n)];
  const pids: Array<number | undefined> = [];
  const rows: Row[] = [];
  let shutdown = { ms: NaN, replicas: NaN, pins: NaN };
  ctx.log(`s: the writer alone (old and new way) with ${n} pins in a child process, ${CHILD_WRITES} writes each`);
  const alone = await writerAlone(ctx, n);
  try {
    const plain = await startRouter(await fleetConfig(ctx, 'a'), common);
    rows.push({ label: 'without --state-file', router: plain, prefix: 'a', windows: [] });
    pids.push(await replicaPid(plain.url));
    const withFile = await adoptedRouter(ctx, 's', n, common, pids);
    rows.push({ label: `with --state-file, ${n} pins`, ...withFile, prefix: 'b', windows: [] });
    // The control holds the same pins but cannot write: its state directory becomes a plain file,
    // and its journal (held open) is removed, so its next append fails and every write after it is a snapshot that
    // fails at its first step (mkdir) before looking at a pin.
    const control = await adoptedRouter(ctx, 'c', n, common, pids);
    const dir = join(control.stateFile, '..');
    renameSync(dir, `${dir}.moved`);
    writeFileSync(dir, 'not a directory');
    // Its journal is open in it: removed, its next append fails and asks for a snapshot (which fails).
    rmSync(journalPathOf(join(`${dir}.moved`, basename(control.stateFile))));
    rows.push({ label: `control: ${n} pins, state file unwritable`, router: control.router, prefix: 'c', windows: [] });
    for (const row of rows) {
      ctx.log(`s: ${row.label}: warm-up ${plan.fixedWarmupS}s at ${plan.fixedRate} req/s`);
      await runOpenLoop({ url: new URL(CHAT_PATH, row.router.url), rate: plan.fixedRate, durationS: plan.fixedWarmupS, body: newSessions(`${row.prefix}w`) });
    }
    // Every router stays up (an idle one changes no pins, so it writes nothing); rounds alternate
    // them so that other work on the shared machine hits all alike.
    for (let r = 1; r <= rounds; r++) {
      for (const row of r % 2 === 1 ? rows : [...rows].reverse()) {
        ctx.log(`s: round ${r}/${rounds}: ${row.label}: ${windowS}s at ${plan.fixedRate} req/s, a new session per request`);
        row.windows.push(await measure(ctx, row, windowS, `${row.prefix}${r}`));
      }
    }
  } finally {
    for (const row of rows) {
      const t1 = performance.now();
      await row.router.stop();
      if (row.stateFile !== undefined && row.router.child.exitCode === 0) {
        const doc = JSON.parse(readFileSync(row.stateFile, 'utf8')) as { replicas: unknown[]; sessions: unknown[] };
        shutdown = { ms: performance.now() - t1, replicas: doc.replicas.length, pins: doc.sessions.length };
      }
    }
    for (const p of pids) kill(p);
  }
  const [without, withFile, control] = rows;
  if (without === undefined || withFile === undefined || control === undefined) throw new Error('scenario s measured fewer than three routers');
  const p99 = (row: Row): number => median(row.windows.map((w) => w.result.latency.p99));
  const lagMax = (row: Row): number => Math.max(...row.windows.map((w) => w.lagMaxMs));
  const loopMax = (row: Row): number => Math.max(...row.windows.map((w) => w.loopMaxMs));
  const flushes = withFile.windows.reduce((a, w) => a + w.flushes, 0);
  const errors = withFile.windows.reduce((a, w) => a + w.result.errors + w.result.non2xx, 0);
  const ratioOfMedians = p99(withFile) / p99(without);
  // Each round's ratio compares windows seconds apart, under much the same background load.
  const paired = (row: Row, base: Row): number[] => row.windows.map((w, i) => w.result.latency.p99 / (base.windows[i]?.result.latency.p99 ?? NaN));
  const ratio = median(paired(withFile, without));
  const vsControl = median(paired(withFile, control));
  const notes = [
    `Load: open loop (open-loop.ts), ${plan.fixedRate} req/s, ~1 KB non-streaming chat, a new \`session_id\` per request, so every request adds a pin and the router with a state file flushes the pins that changed once a second (a line appended to its journal, \`<state file>.journal\`; the full file is rewritten only when the journal outgrows it). Each router owns one launched simulator (a \`hosts\` entry, \`--initial-replicas 1\`), \`--max-sessions ${n}\`. The ${n} pins are adopted from a state file at start (a router wrote the file, was SIGKILLed, and the pins were appended to it), so the router with the file holds ${n} pins throughout (new sessions evict the oldest) while the baseline holds only those the load makes. The control router adopted ${n} pins the same way, then its state directory was replaced by a plain file: its next journal append fails (the journal is opened by its path and never created by an append) and every write after that is a full snapshot that fails at mkdir before looking at a pin (logged, /readyz degraded), so it differs from the router with the file only by the writing, which "with ÷ control" isolates from the cost of holding ${n} sessions (a larger heap to collect).`,
    `All three routers stay up; after ${plan.fixedWarmupS} s of warm-up each, ${rounds} round(s) alternate them (${windowS} s per router per round, the order reversed every other round) so other work on the shared machine hits all alike. "p99 ÷ without, same round" divides a router's p99 by the baseline's in the same round; the target takes the median of those ratios (the ratio of the median p99s is shown beside it); lag max = the largest of the rounds'.`,
    `Event-loop lag, two instruments. "loop max/p99 (1 ms)": a perf_hooks.monitorEventLoopDelay at 1 ms resolution preloaded into each router (bench/loop-probe.ts, \`node --import\`), read and reset through SIGUSR2 right before and right after each window: a hold of H ms reads H to H + 1 ms, an idle loop ~1 ms. The target is judged on it. "prom lag": the router's own \`nodejs_eventloop_lag_max_seconds\` / \`_p99_seconds\` (prom-client over perf_hooks.monitorEventLoopDelay at 10 ms resolution), scraped right before and right after each window; prom-client resets the histogram on every scrape, so each number covers its window only. The histogram records the whole interval between the monitor's ticks: an idle router reads ~10 ms, and a hold of H ms reads H to H + 10 ms. The lag also counts time the router process was not scheduled at all, which on a machine shared with other work is not the router's doing: the baseline's lag under the same load shows that floor. "router CPU s/s" = the router's \`process_cpu_seconds_total\` (all its threads, the fs writes on libuv's pool included) over the window ÷ its length: on a machine whose cores are shared, the CPU the writing costs turns into request latency. "flushes" = distinct modification times of the state file and of its journal seen (polled every 50 ms) during the window.`,
    `The writer alone (statefile-child.ts, run first, in its own process with --expose-gc; a full GC before each write so one write's garbage is not collected in the next one's window): the same SessionDirectory of ${n} pins written ${CHILD_WRITES} times the old way (every pin into an array, \`JSON.stringify(state, null, 2)\`, writeSync/fsyncSync/renameSync on the event loop, restated from the code item 4 replaced) and ${CHILD_WRITES} times the new way, alternating after two warm-up writes each; "event loop held" = the longest interval between ticks of perf_hooks.monitorEventLoopDelay at 1 ms resolution (a hold of H ms reads H to H + 1).`,
    `At SIGTERM the router with the file drained, stopped its replica (which releases its pins) and wrote the file a last time: ${fmt(shutdown.ms / 1000, 1)} s from SIGTERM to exit, the file then lists ${shutdown.replicas} replicas and ${shutdown.pins} pins.`,
  ];
  const summary = rows.map((row) => [
    row.label,
    fmt(median(row.windows.map((w) => w.result.latency.p50)), 3),
    fmt(p99(row), 3),
    fmt(p99(row) / p99(without), 2),
    fmt(p99(row) / p99(control), 2),
    fmt(median(paired(row, without)), 2),
    fmt(loopMax(row), 1),
    fmt(median(row.windows.map((w) => w.loopP99Ms)), 1),
    fmt(lagMax(row), 1),
    fmt(median(row.windows.map((w) => w.lagP99Ms)), 1),
    fmt(median(row.windows.map((w) => w.cpu)), 2),
  ]);
  const cols = [
    'target',
    'round',
    'sent',
    'ok',
    'errors',
    'non-2xx',
    'p50 ms',
    'p90 ms',
    'p99 ms',
    'max ms',
    'p99 ÷ without, same round',
    'loop max ms (1 ms)',
    'loop p99 ms (1 ms)',
    'prom lag max ms (10 ms)',
    'prom lag p99 ms (10 ms)',
    'router CPU s/s',
    'pins held',
    'flushes',
  ];
  const cells = (row: Row, w: Window, r: number): string[] => [
    row.label,
    String(r),
    String(w.result.sent),
    String(w.result.ok),
    String(w.result.errors),
    String(w.result.non2xx),
    fmt(w.result.latency.p50, 3),
    fmt(w.result.latency.p90, 3),
    fmt(w.result.latency.p99, 3),
    fmt(w.result.latency.max, 3),
    fmt(w.result.latency.p99 / (without.windows[r - 1]?.result.latency.p99 ?? NaN), 2),
    fmt(w.loopMaxMs, 1),
    fmt(w.loopP99Ms, 1),
    fmt(w.lagMaxMs, 1),
    fmt(w.lagP99Ms, 1),
    fmt(w.cpu, 2),
    String(w.pins),
    row.stateFile === undefined ? '' : String(w.flushes),
  ];
  return {
    id: 's-statefile',
    title: 'State file with 1,000,000 pinned sessions',
    tables: [
      {
        title: `(s) the writer alone: ${n} pins in a SessionDirectory, ${CHILD_WRITES} writes each way, medians over the writes`,
        columns: ['writer', 'wall ms', 'CPU ms', 'event loop held max ms (median write)', 'event loop held max ms (worst write)', 'file MiB'],
        rows: [
          [
            'before: array + JSON.stringify(…, null, 2) + writeSync/fsyncSync on the loop',
            fmt(alone.old.wallMs, 0),
            fmt(alone.old.cpuMs, 0),
            fmt(alone.old.loopMedianMs, 1),
            fmt(alone.old.loopMaxMs, 1),
            fmt(alone.old.fileMiB, 1),
          ],
          [
            'now: openPass slices + PinEncoder + fs/promises',
            fmt(alone.now.wallMs, 0),
            fmt(alone.now.cpuMs, 0),
            fmt(alone.now.loopMedianMs, 1),
            fmt(alone.now.loopMaxMs, 1),
            fmt(alone.now.fileMiB, 1),
          ],
        ],
      },
      {
        title: `(s) summary over ${rounds} round(s): medians of the rounds' percentiles, largest lag max`,
        columns: [
          'target',
          'p50 ms',
          'p99 ms',
          'p99 ÷ without',
          'p99 ÷ control',
          'median of p99 ÷ without, same round',
          'loop max ms (1 ms)',
          'loop p99 ms (1 ms)',
          'prom lag max ms (10 ms)',
          'prom lag p99 ms (10 ms)',
          'router CPU s/s',
        ],
        rows: summary,
      },
      {
        title: `(s) ${plan.fixedRate} req/s, a new session per request, ${windowS} s per window, with and without --state-file`,
        columns: cols,
        rows: rows.flatMap((row) => row.windows.map((w, i) => cells(row, w, i + 1))),
      },
    ],
    targets: [
      {
        target: `(s) event-loop lag max ≤ ${LAG_TARGET_MS} ms while ${n} pinned sessions are flushed`,
        measured: `${fmt(loopMax(withFile), 1)} ms at 1 ms resolution over ${flushes} flushes (same load without --state-file: ${fmt(loopMax(without), 1)} ms; control: ${fmt(loopMax(control), 1)} ms; prom-client at 10 ms: ${fmt(lagMax(withFile), 1)}, ${fmt(lagMax(without), 1)}, ${fmt(lagMax(control), 1)} ms); the writer alone holds the loop ${fmt(alone.now.loopMedianMs, 1)} ms in the median write, ${fmt(alone.now.loopMaxMs, 1)} ms in the worst (before: ${fmt(alone.old.loopMedianMs, 0)} ms)`,
        pass: loopMax(withFile) <= LAG_TARGET_MS && flushes > 0,
      },
      {
        target: `(s) request p99 with --state-file ≤ ${P99_TARGET_RATIO}× without it, the same ${n} pins held (÷ control)`,
        measured: `${fmt(vsControl, 2)}× (median of ${rounds} same-round ratios to the control; median p99s ${fmt(p99(withFile), 3)} vs ${fmt(p99(control), 3)} ms), ${errors} errors`,
        pass: vsControl <= P99_TARGET_RATIO && errors === 0,
      },
      {
        target: `(s) the same ÷ a router without --state-file that holds only the pins its load makes`,
        measured: `${fmt(ratio, 2)}× (median of ${rounds} same-round ratios; median p99s ${fmt(p99(withFile), 3)} vs ${fmt(p99(without), 3)} ms = ${fmt(ratioOfMedians, 2)}×); the control, which holds the same pins and writes nothing: ${fmt(median(paired(control, without)), 2)}×`,
        pass: ratio <= P99_TARGET_RATIO && errors === 0,
      },
    ],
    charts: [],
    notes,
    data: {
      writerAlone: alone,
      rounds: rows.map((r) => ({
        label: r.label,
        windows: r.windows.map((w) => ({ ...w, result: { ...w.result, latency: roundSummary(w.result.latency), lag: roundSummary(w.result.lag) } })),
      })),
      p99Ratio: ratio,
      p99RatioOfMedians: ratioOfMedians,
      shutdown,
    },
  };
}

/** Scenario (s). */
export const stateFileScenario: Scenario = { key: 's', id: 's-statefile', title: 'State file with 1,000,000 pinned sessions', run };
