/**
 * Scenario (s)'s timed windows: one router's open-loop window with what it measures (latency, the
 * 1 ms loop monitor, the router's /metrics, the state file's writes), and settling a router that
 * adopted 1M pins before the rounds (statefile-routers.ts starts the routers).
 */
import { statSync } from 'node:fs';
import { runOpenLoop, type OpenLoopResult } from './open-loop.js';
import type { LoopHold } from './loop-probe.js';
import { admin, loopSample, scrape, writeHoldBoundMs, type Router } from './statefile-routers.js';
import type { BenchContext } from './scenario.js';
import { fmt } from './stats.js';
import { CHAT_PATH, chatBodies } from './workload.js';
import { journalPathOf } from '../src/modules/state/state-journal.js';

/** What the 1 ms monitor reads for a loop that is not held: holds shorter than 3 ms are not noted. */
export const LOOP_FLOOR_MS = 3;
/**
 * A write is the end of a flush: the pins changed are encoded (on the loop, in slices), then the
 * line goes to libuv's pool, which writes it (the modification time) and fdatasyncs. A hold overlaps
 * the flush when it touches the 30 ms before the write or the 5 ms after it (the clock that stamps
 * modification times ticks every few ms).
 */
const FLUSH_SPAN_MS = [30, 5] as const;
const overlapsWrite = ([start, ms]: LoopHold, write: number): boolean => start <= write + FLUSH_SPAN_MS[1] && start + ms >= write - FLUSH_SPAN_MS[0];
/** The longest a router that adopted pins is driven to settle before the rounds. */
const SETTLE_MAX_S = 150;
/** Settled: the heap is below this share of what it was when the router became ready. */
export const SETTLED_HEAP = 0.6;
/** One router's timed windows, one per round. */
export interface Row {
  label: string;
  router: Router;
  stateFile?: string;
  prefix: string;
  windows: TimedWindow[];
  /** Routers that adopted pins: heap used when ready (MiB), and how they settled. */
  heapAtReady?: number;
  /** The router that is its own control: whether it writes its state file in this row's windows. */
  writes?: boolean;
  settled?: Settled;
}

export interface TimedWindow {
  result: OpenLoopResult;
  /** prom-client's reading (10 ms resolution). */
  lagMaxMs: number;
  lagP99Ms: number;
  /** The 1 ms monitor preloaded into the router (loop-probe.ts). */
  loopMaxMs: number;
  loopP99Ms: number;
  /** The longest hold of the loop that overlapped a write of the state file or its journal (NaN: no writes). */
  flushHoldMaxMs: number;
  /** The router's own bound on the longest loop hold of its writes (`state_write_loop_hold_seconds` bucket; NaN: no writes). */
  writeHoldMs: number;
  /** Garbage collections in the window: major ones, and the pause of all kinds. */
  majorGcs: number;
  gcPauseMs: number;
  /** Router CPU seconds per second of the window (all threads). */
  cpu: number;
  pins: number;
  flushes: number;
}

const TEMPLATE = chatBodies(1, 1024, 7)[0] ?? '';
const TEMPLATE_ID = /"session_id":"([0-9a-f]+)"/.exec(TEMPLATE)?.[1] ?? '';

/** Bodies with a new session each: 32-character ids like the router's own, distinct per router and phase. */
export const newSessions =
  (tag: string) =>
  (i: number): string =>
    TEMPLATE.replace(TEMPLATE_ID, `${tag}${i.toString(16).padStart(32 - tag.length, '0')}`);

/** One timed window on `row`'s router; counts the writes of the state file and its journal meanwhile. */
export async function measure(ctx: BenchContext, row: Row, durationS: number, tag: string): Promise<TimedWindow> {
  const { plan } = ctx.options;
  const { router, stateFile } = row;
  const mtimes = new Set<string>();
  /** When each write seen happened (the files' modification times, ms since the epoch). */
  const writes = new Set<number>();
  const files = stateFile === undefined ? [] : [stateFile, journalPathOf(stateFile)];
  let primed = false;
  const look = (): void => {
    for (const f of files) {
      const m = statSync(f, { throwIfNoEntry: false })?.mtimeMs;
      const key = `${f}@${m ?? 'none'}`;
      if (primed && m !== undefined && !mtimes.has(key)) writes.add(m);
      mtimes.add(key);
    }
    primed = true;
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
    flushHoldMaxMs:
      writes.size === 0 ? NaN : Math.max(LOOP_FLOOR_MS, ...loop.holds.filter((h) => [...writes].some((m) => overlapsWrite(h, m))).map((h) => h[1])),
    cpu,
    pins,
    flushes: writes.size,
    writeHoldMs: writeHoldBoundMs(before, after),
    majorGcs: after.majorGcs - before.majorGcs,
    gcPauseMs: after.gcPauseMs - before.gcPauseMs,
  };
}

/** The heap a router uses (MiB). */
export async function heapUsed(router: Router): Promise<number> {
  return (await scrape(router.url)).heapUsedMiB;
}

/** How a router that adopted the pins settled: how long it took, its heap, and what that did to its requests. */
export interface Settled {
  seconds: number;
  /** Heap used when it became ready and once settled (MiB). */
  heapFromMiB: number;
  heapToMiB: number;
  /** The slowest request and the p99 of the 2-second burst in which it settled. */
  worstMs: number;
  p99Ms: number;
  done: boolean;
}

/**
 * Drives `row`'s router in 2-second bursts until the major collection that frees what reading 1M
 * pins from the state file left in the old generation (~220 MB here: the heap falls from ~336 to
 * ~117 MB) has happened: its heap is below SETTLED_HEAP of what it was when it became ready. That
 * collection comes 2–70 s into the load and stalls requests once for ~150 ms. Until it has happened
 * a router runs with a high heap limit and makes no major collection at all; after it, one every
 * ~10 s. Left to happen during the rounds, it puts one router in the one regime and the other in
 * the other, and the p99 compares those instead of the writing.
 */
export async function settle(ctx: BenchContext, row: Row, before: number): Promise<Settled> {
  const { plan } = ctx.options;
  const t0 = performance.now();
  for (let i = 0; ; i++) {
    const r = await runOpenLoop({ url: new URL(CHAT_PATH, row.router.url), rate: plan.fixedRate, durationS: 2, body: newSessions(`${row.prefix}s${i}`) });
    const seconds = (performance.now() - t0) / 1000;
    const heap = await heapUsed(row.router);
    const done = heap < before * SETTLED_HEAP;
    if (done || seconds > SETTLE_MAX_S) {
      ctx.log(
        `s: ${row.label}: heap ${fmt(before, 0)} -> ${fmt(heap, 0)} MiB after ${fmt(seconds, 0)} s of load; slowest request of that burst ${fmt(r.latency.max, 0)} ms`,
      );
      return { seconds, heapFromMiB: before, heapToMiB: heap, worstMs: r.latency.max, p99Ms: r.latency.p99, done };
    }
  }
}

export const sumOf = (row: Row, f: (w: TimedWindow) => number): number => row.windows.reduce((a, w) => a + (Number.isNaN(f(w)) ? 0 : f(w)), 0);

export const settledText = (row: Row): string => {
  const st = row.settled;
  if (st === undefined) return 'not settled';
  const heap = `heap ${fmt(st.heapFromMiB, 0)} -> ${fmt(st.heapToMiB, 0)} MiB`;
  if (!st.done) return `not within ${fmt(st.seconds, 0)} s (${heap})`;
  return `after ${fmt(st.seconds, 0)} s of load (${heap}), its slowest request then ${fmt(st.worstMs, 0)} ms (p99 of that 2 s burst ${fmt(st.p99Ms, 0)} ms)`;
};
