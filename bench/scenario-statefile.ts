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
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runOpenLoop } from './open-loop.js';
import { isObject, runReportChild } from './processes.js';
import type { BenchContext, Scenario, ScenarioResult } from './scenario.js';
import type { StateFileChildReport } from './statefile-child.js';
import { adoptedRouter, fleetConfig, kill, replicaPid, startRouter, WriteSwitch } from './statefile-routers.js';
import { heapUsed, LOOP_FLOOR_MS, measure, newSessions, SETTLED_HEAP, settle, settledText, sumOf, type Row, type TimedWindow } from './statefile-windows.js';
import { fmt, roundSummary, summarize } from './stats.js';
import { CHAT_PATH } from './workload.js';

/** Compiled writer-alone child (statefile-child.ts). */
const STATEFILE_CHILD = join(dirname(fileURLToPath(import.meta.url)), 'statefile-child.js');
/** Writes per way in the writer-alone child. */
const CHILD_WRITES = 5;
const LAG_TARGET_MS = 20;
const P99_TARGET_RATIO = 1.2;

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
  const rounds = ctx.options.quick ? 2 : 10;
  const windowS = Math.max(1, Math.round(plan.fixedLoadS / rounds));
  const common = ['--initial-replicas', '1', '--max-sessions', String(n)];
  const pids: Array<number | undefined> = [];
  const rows: Row[] = [];
  let shutdown = { ms: NaN, replicas: NaN, pins: NaN };
  let writeSwitch: WriteSwitch | undefined;
  /** The longest loop hold of each full snapshot written when the file became writable again (router metric, bucket bound ms). */
  const snapshotHolds: number[] = [];
  ctx.log(`s: the writer alone (old and new way) with ${n} pins in a child process, ${CHILD_WRITES} writes each`);
  const alone = await writerAlone(ctx, n);
  try {
    const plain = await startRouter(await fleetConfig(ctx, 'a'), common);
    rows.push({ label: 'without --state-file', router: plain, prefix: 'a', windows: [] });
    pids.push(await replicaPid(plain.url));
    // The control is the same router with its state directory made unwritable: two routers that
    // adopted the same pins fall into different regimes of major collections (one every ~10 s, or
    // none for minutes), whichever of them writes, so only the router against itself isolates the writing.
    const subject = await adoptedRouter(ctx, 's', n, common, pids);
    writeSwitch = new WriteSwitch(subject.router, subject.stateFile);
    rows.push({ label: `with --state-file, ${n} pins`, ...subject, prefix: 'b', windows: [], heapAtReady: await heapUsed(subject.router), writes: true });
    rows.push({ label: `control: the same router, state file unwritable`, router: subject.router, prefix: 'c', windows: [], writes: false });
    for (const row of rows) {
      ctx.log(`s: ${row.label}: warm-up ${plan.fixedWarmupS}s at ${plan.fixedRate} req/s`);
      await runOpenLoop({ url: new URL(CHAT_PATH, row.router.url), rate: plan.fixedRate, durationS: plan.fixedWarmupS, body: newSessions(`${row.prefix}w`) });
      if (row.heapAtReady !== undefined) row.settled = await settle(ctx, row, row.heapAtReady);
    }
    const sw = writeSwitch;
    const switchTo = async (row: Row): Promise<void> => {
      if (row.writes === undefined) return;
      const hold = await sw.set(row.writes);
      if (hold !== undefined) snapshotHolds.push(hold);
    };
    // Every router stays up (an idle one changes no pins, so it writes nothing). The order rotates
    // each round, so each router takes each place equally often.
    for (let r = 1; r <= rounds; r++) {
      const k = (r - 1) % rows.length;
      for (const row of [...rows.slice(k), ...rows.slice(0, k)]) {
        ctx.log(`s: round ${r}/${rounds}: ${row.label}: ${windowS}s at ${plan.fixedRate} req/s, a new session per request`);
        await switchTo(row);
        row.windows.push(await measure(ctx, row, windowS, `${row.prefix}${r}`));
      }
    }
  } finally {
    await writeSwitch?.set(true).catch(() => undefined);
    for (const row of rows) {
      if (row.router.child.exitCode !== null) continue;
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
  const flushHoldMax = Math.max(...withFile.windows.map((w) => (Number.isNaN(w.flushHoldMaxMs) ? 0 : w.flushHoldMaxMs)));
  const snapshotHold = Math.max(0, ...snapshotHolds);
  const writeHold = Math.max(...withFile.windows.map((w) => (Number.isNaN(w.writeHoldMs) ? 0 : w.writeHoldMs)));
  const flushes = withFile.windows.reduce((a, w) => a + w.flushes, 0);
  const errors = withFile.windows.reduce((a, w) => a + w.result.errors + w.result.non2xx, 0);
  const ratioOfMedians = p99(withFile) / p99(without);
  // Each round's ratio compares windows seconds apart, under much the same background load.
  const paired = (row: Row, base: Row): number[] => row.windows.map((w, i) => w.result.latency.p99 / (base.windows[i]?.result.latency.p99 ?? NaN));
  const ratio = median(paired(withFile, without));
  const vsControl = median(paired(withFile, control));
  // Every request of a row's windows together: a major collection (one every ~10 s of load, a stall
  // of tens of ms) decides the p99 of the window it falls in, so per-window ratios scatter widely.
  const pooledP99 = (row: Row): number => summarize(row.windows.flatMap((w) => w.result.latencies)).p99;
  const pooled = pooledP99(withFile) / pooledP99(control);
  const pooledVsWithout = pooledP99(withFile) / pooledP99(without);
  const notes = [
    `Load: open loop (open-loop.ts), ${plan.fixedRate} req/s, ~1 KB non-streaming chat, a new \`session_id\` per request, so every request adds a pin and the router with a state file flushes the pins that changed once a second (a line appended to its journal, \`<state file>.journal\`; the full file is rewritten only when the journal outgrows it). Each router owns one launched simulator (a \`hosts\` entry, \`--initial-replicas 1\`), \`--max-sessions ${n}\`. The ${n} pins are adopted from a state file at start (a router wrote the file, was SIGKILLed, and the pins were appended to it), so the router with the file holds ${n} pins throughout (new sessions evict the oldest) while the baseline holds only those the load makes. The control is the same router with its state directory made unwritable (bench/statefile-routers.ts WriteSwitch) before each of its windows: the directory is moved aside and a plain file takes its name, and the journal it holds open is removed, so its next append fails and every write after that is a full snapshot that fails at mkdir before looking at a pin (logged, /readyz degraded). Before each window of the router with the file the directory is put back and the bench waits for the router's snapshot (its next write after a failure), so those windows hold journal appends only; before each control window it waits for the router's first failed write, so both rows' windows follow the same kind of pause (when only the writing row paused, its windows had one or two major collections against the control's four, in two runs). "with ÷ control" thus compares the router with itself, writing and not, isolating the writing from the cost of holding ${n} sessions (a larger heap to collect) and from the regime of major collections the router happens to be in: two routers that adopted the same pins measured one major collection in 5 of 6 windows against none in 6, whichever of them wrote (a run with both writing), and a control that was a second router put the p99 ratio anywhere from 0.76× to 3.9× over thirteen runs before 2026-12-04 22:10.`,
    `Before the rounds, the router that adopted ${n} pins is driven at the same load until the major collection that frees what reading the pins from the state file left in the old generation has happened (its heap below ${SETTLED_HEAP * 100}% of what it was when ready): ${settledText(withFile)}. Until then a router makes no major collection at all (its heap limit is high); that first one stalls requests once, and left inside a window it decides that window's p99.`,
    `Both routers stay up; after ${plan.fixedWarmupS} s of warm-up each, ${rounds} round(s) alternate the three rows (${windowS} s per row per round, the order rotated each round, so each row takes each place in the order equally often) so other work on the shared machine hits all alike. "p99 ÷ without, same round" divides a router's p99 by the baseline's in the same round; the target takes the median of those ratios (the ratio of the median p99s is shown beside it); lag max = the largest of the rounds'.`,
    `Event-loop lag, two instruments. "loop max/p99 (1 ms)": a perf_hooks.monitorEventLoopDelay at 1 ms resolution preloaded into each router (bench/loop-probe.ts, \`node --import\`), read and reset through SIGUSR2 right before and right after each window: a hold of H ms reads H to H + 1 ms, an idle loop ~1 ms. Beside it a 1 ms interval timer notes when each hold of 3 ms or more began; "loop max during a flush" is the longest hold that touched the 30 ms before a write of the state file or its journal (a modification time the bench saw) or the 5 ms after it. "writes held the loop ≤" is the router's own measure (\`affinity_router_state_write_loop_hold_seconds\`, scraped before and after each window): each write times its synchronous slices of encoding (the longest stretch from getting the loop back to giving it up), and the column shows the smallest bucket bound (1, 2, 5, 10, 20, 50 ms …) that every write of the window is under. The target is judged on it: the outside views also take in the young-generation collections of a 1M-pin heap (6–15 ms each) and the moments the router is not scheduled, which the control that writes nothing shows as well. "prom lag": the router's own \`nodejs_eventloop_lag_max_seconds\` / \`_p99_seconds\` (prom-client over perf_hooks.monitorEventLoopDelay at 10 ms resolution), scraped right before and right after each window; prom-client resets the histogram on every scrape, so each number covers its window only. The histogram records the whole interval between the monitor's ticks: an idle router reads ~10 ms, and a hold of H ms reads H to H + 10 ms. The lag also counts time the router process was not scheduled at all, which on a machine shared with other work is not the router's doing: the baseline's lag under the same load shows that floor. "router CPU s/s" = the router's \`process_cpu_seconds_total\` (all its threads, the fs writes on libuv's pool included) over the window ÷ its length: on a machine whose cores are shared, the CPU the writing costs turns into request latency. "flushes" = distinct modification times of the state file and of its journal seen (polled every 50 ms) during the window.`,
    `The writer alone (statefile-child.ts, run first, in its own process with --expose-gc; a full GC before each write so one write's garbage is not collected in the next one's window): the same SessionDirectory of ${n} pins written ${CHILD_WRITES} times the old way (every pin into an array, \`JSON.stringify(state, null, 2)\`, writeSync/fsyncSync/renameSync on the event loop, restated from the code item 4 replaced) and ${CHILD_WRITES} times the new way, alternating after two warm-up writes each; "event loop held" = the longest interval between ticks of perf_hooks.monitorEventLoopDelay at 1 ms resolution (a hold of H ms reads H to H + 1).`,
    `Against the router without --state-file, which holds only the pins its load makes: with the file ${fmt(pooledVsWithout, 2)}× (p99 of all requests ${fmt(pooledP99(withFile), 3)} vs ${fmt(pooledP99(without), 3)} ms; median of ${rounds} same-round ratios ${fmt(ratio, 2)}×, of the median p99s ${fmt(ratioOfMedians, 2)}×), and the control, which writes nothing, ${fmt(pooledP99(control) / pooledP99(without), 2)}×: that is what holding ${n} pins costs (a ~130 MB heap to collect, major collections the few-pins router does not make), not the file.`,
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
    'loop max during a flush ms',
    'writes held the loop ≤ ms (router metric)',
    'loop p99 ms (1 ms)',
    'prom lag max ms (10 ms)',
    'prom lag p99 ms (10 ms)',
    'router CPU s/s',
    'major GCs',
    'GC pause ms',
    'pins held',
    'flushes',
  ];
  const cells = (row: Row, w: TimedWindow, r: number): string[] => [
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
    Number.isNaN(w.flushHoldMaxMs) ? '' : w.flushHoldMaxMs <= LOOP_FLOOR_MS ? `< ${LOOP_FLOOR_MS}` : fmt(w.flushHoldMaxMs, 1),
    Number.isNaN(w.writeHoldMs) ? '' : fmt(w.writeHoldMs, 0),
    fmt(w.loopP99Ms, 1),
    fmt(w.lagMaxMs, 1),
    fmt(w.lagP99Ms, 1),
    fmt(w.cpu, 2),
    String(w.majorGcs),
    fmt(w.gcPauseMs, 0),
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
        measured: `every one of ${flushes} journal flushes held the loop ≤ ${fmt(writeHold, 0)} ms (the router's own measure of its writes' slices, \`state_write_loop_hold_seconds\`: the smallest bucket bound that holds them all). Seen from outside by the 1 ms monitor: the longest hold overlapping a flush ${fmt(flushHoldMax, 1)} ms, which takes in any young-generation collection or descheduling that falls there; the longest hold over the whole windows, flushing or not, ${fmt(loopMax(withFile), 1)} ms (without --state-file: ${fmt(loopMax(without), 1)} ms; the control, which writes nothing: ${fmt(loopMax(control), 1)} ms; prom-client at 10 ms: ${fmt(lagMax(withFile), 1)}, ${fmt(lagMax(without), 1)}, ${fmt(lagMax(control), 1)} ms). The ${snapshotHolds.length} full snapshots of the ${n} pins the router wrote when its file became writable again (before the windows, at no load) each held the loop ≤ ${fmt(snapshotHold, 0)} ms by the same measure. A full snapshot alone in a process (1 ms monitor): ${fmt(alone.now.loopMedianMs, 1)} ms in the median write, ${fmt(alone.now.loopMaxMs, 1)} ms in the worst (before: ${fmt(alone.old.loopMedianMs, 0)} ms)`,
        pass: writeHold <= LAG_TARGET_MS && snapshotHold <= LAG_TARGET_MS && flushes > 0,
      },
      {
        target: `(s) request p99 with --state-file ≤ ${P99_TARGET_RATIO}× without it, the same ${n} pins held (÷ control)`,
        measured: `${fmt(pooled, 2)}×: p99 of all ${withFile.windows.reduce((a, w) => a + w.result.ok, 0)} requests of its ${rounds} windows ${fmt(pooledP99(withFile), 3)} ms against the same router's unwritable windows ${fmt(pooledP99(control), 3)} ms (major collections in the windows: ${sumOf(withFile, (w) => w.majorGcs)} against ${sumOf(control, (w) => w.majorGcs)}); the median of the ${rounds} same-round ratios, which one collection moves either way, ${fmt(vsControl, 2)}×; ${errors} errors`,
        pass: pooled <= P99_TARGET_RATIO && errors === 0,
      },
    ],
    charts: [],
    notes,
    data: {
      writerAlone: alone,
      rounds: rows.map((r) => ({
        label: r.label,
        windows: r.windows.map(({ result: { latencies: _raw, ...result }, ...w }) => ({
          ...w,
          result: { ...result, latency: roundSummary(result.latency), lag: roundSummary(result.lag) },
        })),
      })),
      settled: rows.map((r) => ({ label: r.label, settled: r.settled })),
      p99Ratio: ratio,
      p99RatioOfMedians: ratioOfMedians,
      shutdown,
    },
  };
}

/** Scenario (s). */
export const stateFileScenario: Scenario = { key: 's', id: 's-statefile', title: 'State file with 1,000,000 pinned sessions', run };
