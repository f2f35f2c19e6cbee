/**
 * Preloaded into a router by scenario (s) (`node --import <this file> main.js`): an event-loop
 * delay monitor at 1 ms resolution, finer than prom-client's 10 ms (whose reading of a hold of H ms
 * is anywhere from H to H + 10). On SIGUSR2 it writes what it saw since the last signal to the
 * file named by BENCH_LOOP_FILE (`{seq, maxMs, p99Ms}`, via a rename so a reader never sees half)
 * and starts afresh. Without BENCH_LOOP_FILE it does nothing.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

/** The monitor's tick: an idle loop reads about this much. */
export const LOOP_PROBE_RESOLUTION_MS = 1;

const file = process.env.BENCH_LOOP_FILE;
if (file !== undefined && file !== '') {
  const h = monitorEventLoopDelay({ resolution: LOOP_PROBE_RESOLUTION_MS });
  h.enable();
  let seq = 0;
  process.on('SIGUSR2', () => {
    seq++;
    writeFileSync(`${file}.tmp`, JSON.stringify({ seq, maxMs: h.max / 1e6, p99Ms: h.percentile(99) / 1e6 }));
    renameSync(`${file}.tmp`, file);
    h.reset();
  });
}
