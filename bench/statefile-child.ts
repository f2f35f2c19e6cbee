/**
 * Scenario (s) child: the state-file writer alone, with N pinned sessions in a real
 * SessionDirectory, written K times the old way and K times the new way (alternating), while
 * perf_hooks.monitorEventLoopDelay (1 ms resolution) records how long the event loop is held.
 *
 * The old way is the code issue 13 item 4 replaced, restated here: every live pin into an array,
 * `JSON.stringify(state, null, 2)`, then writeSync/fsyncSync/renameSync and a directory fsync, all
 * on the event loop. The new way is the router's own: `writeStateFile` fed by `pinChunks`.
 *
 * Usage: node --expose-gc statefile-child.js <pins> <writes> <dir>; prints one JSON line (StateFileChildReport).
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout } from 'node:timers/promises';
import { SessionDirectory, type PinTarget } from '../src/modules/affinity/session-directory.js';
import { ReplicaPins } from '../src/modules/registry/replica-pins.js';
import { writeStateFile } from '../src/modules/state/state-file.js';
import { pinChunks } from '../src/modules/state/state-pins.js';
import { hexId } from './workload.js';
import { seededRandom } from './stats.js';

/** What one way of writing measured: medians over the writes, and the worst loop hold. */
export interface WriterReport {
  writes: number;
  wallMs: number;
  cpuMs: number;
  /** Longest interval between the 1 ms monitor's ticks in the median write, and in the worst (a hold of H ms reads H to H + 1). */
  loopMedianMs: number;
  loopMaxMs: number;
  fileMiB: number;
}

export interface StateFileChildReport {
  pins: number;
  old: WriterReport;
  now: WriterReport;
}

function oldWrite(path: string, dir: SessionDirectory<PinTarget>): void {
  const sessions: Array<{ id: string; replica: string }> = [];
  const pass = dir.openPass();
  while (pass.next(0, Number.MAX_SAFE_INTEGER, (id, t) => sessions.push({ id, replica: t.name }) > 0));
  pass.close();
  const bytes = Buffer.from(JSON.stringify({ version: 1, epoch: 0, written_at: new Date().toISOString(), replicas: [], sessions }, null, 2) + '\n');
  const tmp = `${path}.old.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off, bytes.length - off);
  fsyncSync(fd);
  closeSync(fd);
  renameSync(tmp, path);
  const dfd = openSync(join(path, '..'), 'r');
  fsyncSync(dfd);
  closeSync(dfd);
}

interface Run {
  wallMs: number;
  cpuMs: number;
  loopMaxMs: number;
}

/** One write, with the event loop watched from just before it to just after it. */
async function measure(write: () => Promise<void> | void): Promise<Run> {
  // The old way leaves ~100 MB of garbage: collect it here (--expose-gc), not in the next window.
  (globalThis as { gc?: () => void }).gc?.();
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  await setTimeout(20); // the monitor's first ticks
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await write();
  const wallMs = performance.now() - t0;
  const c = process.cpuUsage(c0);
  await setTimeout(20); // a hold at the very end is recorded at the next tick
  h.disable();
  return { wallMs, cpuMs: (c.user + c.system) / 1000, loopMaxMs: h.max / 1e6 };
}

function summary(runs: readonly Run[], path: string): WriterReport {
  const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  return {
    writes: runs.length,
    wallMs: med(runs.map((r) => r.wallMs)),
    cpuMs: med(runs.map((r) => r.cpuMs)),
    loopMedianMs: med(runs.map((r) => r.loopMaxMs)),
    loopMaxMs: Math.max(...runs.map((r) => r.loopMaxMs)),
    fileMiB: statSync(path).size / 2 ** 20,
  };
}

async function main(): Promise<void> {
  const [pinsArg, writesArg, out] = process.argv.slice(2);
  const pins = Number(pinsArg);
  const writes = Number(writesArg);
  if (!(pins > 0) || !(writes > 0) || out === undefined) throw new Error('usage: statefile-child.js <pins> <writes> <dir>');
  mkdirSync(out, { recursive: true });
  const dir = new SessionDirectory<PinTarget>(3_600_000, pins);
  const target: PinTarget = { name: 's-d0', pinning: new ReplicaPins() };
  const random = seededRandom(4);
  for (let i = 0; i < pins; i++) dir.pin(hexId(random), target, 0);
  const oldPath = join(out, 'old.json');
  const newPath = join(out, 'new.json');
  const head = { version: 1, epoch: 0, written_at: new Date().toISOString(), replicas: [] };
  const writeNew = async (): Promise<void> => {
    await writeStateFile(
      newPath,
      head,
      pinChunks(
        () => dir.openPass(),
        () => 0,
        (t) => t.name,
      ),
    );
  };
  // Warm both code paths (the JIT), then alternate so drift on a shared machine hits both alike.
  for (let i = 0; i < 2; i++) {
    oldWrite(oldPath, dir);
    await writeNew();
  }
  const oldRuns: Run[] = [];
  const newRuns: Run[] = [];
  for (let i = 0; i < writes; i++) {
    oldRuns.push(await measure(() => oldWrite(oldPath, dir)));
    newRuns.push(await measure(writeNew));
  }
  const report: StateFileChildReport = { pins, old: summary(oldRuns, oldPath), now: summary(newRuns, newPath) };
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
