/**
 * Preloaded into a router by scenario (s) (`node --import <this file> main.js`): an event-loop
 * delay monitor at 1 ms resolution, finer than prom-client's 10 ms (whose reading of a hold of H ms
 * is anywhere from H to H + 10), and a 1 ms interval timer that notes when each hold of
 * HOLD_MIN_MS or more began (wall clock), so the scenario can tell which holds overlap a write of
 * the state file. On SIGUSR2 it writes what it saw since the last signal to the file named by
 * BENCH_LOOP_FILE (`{seq, maxMs, p99Ms, holds}`, via a rename so a reader never sees half) and
 * starts afresh. Without BENCH_LOOP_FILE it does nothing.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

/** The monitor's tick: an idle loop reads about this much. */
export const LOOP_PROBE_RESOLUTION_MS = 1;
/** Holds noted with their start: a tick this much later than the last one (the 1 ms interval included). */
const HOLD_MIN_MS = 3;

/** A hold of the loop: when it began (ms since the epoch) and how long it lasted, the 1 ms tick included. */
export type LoopHold = readonly [startMs: number, ms: number];

const file = process.env.BENCH_LOOP_FILE;
if (file !== undefined && file !== '') {
  const h = monitorEventLoopDelay({ resolution: LOOP_PROBE_RESOLUTION_MS });
  h.enable();
  let holds: LoopHold[] = [];
  let last = performance.now();
  setInterval(() => {
    const now = performance.now();
    if (now - last >= HOLD_MIN_MS) holds.push([performance.timeOrigin + last, now - last]);
    last = now;
  }, LOOP_PROBE_RESOLUTION_MS).unref();
  let seq = 0;
  process.on('SIGUSR2', () => {
    seq++;
    writeFileSync(`${file}.tmp`, JSON.stringify({ seq, maxMs: h.max / 1e6, p99Ms: h.percentile(99) / 1e6, holds }));
    renameSync(`${file}.tmp`, file);
    h.reset();
    holds = [];
  });
}
