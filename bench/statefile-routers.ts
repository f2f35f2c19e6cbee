/**
 * Router processes of scenario (s): started as an operator starts them (a config with one local
 * host whose replica is a launched simulator), one of them made to adopt N pins from a state file,
 * and what the scenario reads from them (admin API, /metrics).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { simHost } from '../test/support/fleet.js';
import { parseProm, sum } from '../test/support/prom.js';
import { freePortRange } from '../test/support/router-process.js';
import { freePort, simRequest } from '../test/support/sim-process.js';
import { MAIN_ENTRY } from './bench-options.js';
import { answers, stopChild, track, waitUntil } from './processes.js';
import type { LoopHold } from './loop-probe.js';
import { journalPathOf } from '../src/modules/state/state-journal.js';
import type { BenchContext } from './scenario.js';
import { fmt, seededRandom } from './stats.js';
import { CHAT_PATH, chatBodies, hexId } from './workload.js';

const TOKEN = 'bench-statefile-token';

export interface Router {
  readonly url: string;
  readonly child: ChildProcess;
  /** Where its 1 ms event-loop monitor (loop-probe.ts) writes when signalled. */
  readonly loopFile: string;
  stop(): Promise<void>;
}

/** Compiled loop-probe.ts, preloaded into every router of the scenario. */
const LOOP_PROBE = pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), 'loop-probe.js')).href;
let routers = 0;

/** Starts the router on `configFile` as an operator would and waits until it serves a chat request. */
export async function startRouter(configFile: string, flags: readonly string[]): Promise<Router> {
  const port = await freePort();
  const loopFile = join(dirname(configFile), `loop-${process.pid}-${++routers}.json`);
  const args = ['--import', LOOP_PROBE, MAIN_ENTRY, '--config', configFile, '--host', '127.0.0.1', '--port', String(port), '--log-level', 'warn', ...flags];
  const env = { ...process.env, ROUTER_ADMIN_TOKEN: TOKEN, BENCH_LOOP_FILE: loopFile };
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  track(child);
  let out = '';
  const keep = (b: Buffer): void => void (out = (out + b.toString('utf8')).slice(-16_384));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const url = `http://127.0.0.1:${port}`;
  const body = chatBodies(1, 256)[0] ?? '';
  try {
    await waitUntil(
      async () => {
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(`router exited (${child.exitCode ?? child.signalCode}):\n${out.slice(-2000)}`);
        if (!(await answers(`${url}/readyz`))) return false;
        const r = await simRequest(`${url}${CHAT_PATH}`, { method: 'POST', body: Buffer.from(body), timeoutMs: 5_000 }).catch(() => undefined);
        return r?.status === 200;
      },
      120_000,
      `the router on ${url} to serve through its launched replica`,
    );
  } catch (e: unknown) {
    await stopChild(child, 2_000);
    throw e;
  }
  return { url, child, loopFile, stop: () => stopChild(child, 60_000) };
}

export async function admin(url: string, path: string): Promise<unknown> {
  const r = await simRequest(`${url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` }, timeoutMs: 300_000 });
  if (r.status !== 200) throw new Error(`GET ${path} answered ${r.status}`);
  return JSON.parse(r.body.toString('utf8')) as unknown;
}

/** The launched replica's pid (to stop it if the router leaves it running on a crash). */
export async function replicaPid(url: string): Promise<number | undefined> {
  const doc = (await admin(url, '/replicas')) as { replicas: Array<{ pid: number | null }> };
  return doc.replicas[0]?.pid ?? undefined;
}

/** What the router's 1 ms loop monitor (loop-probe.ts) saw since it was last read. */
export interface LoopSample {
  readonly seq: number;
  readonly maxMs: number;
  readonly p99Ms: number;
  /** Holds of 3 ms or more: [start, ms since the epoch; length ms]. */
  readonly holds: ReadonlyArray<LoopHold>;
}

/**
 * The router's 1 ms event-loop monitor since the previous call (loop-probe.ts): signal it, then
 * wait for its answer file to show the next sequence number.
 */
export async function loopSample(router: Router): Promise<LoopSample> {
  const read = (): LoopSample | undefined => {
    try {
      return JSON.parse(readFileSync(router.loopFile, 'utf8')) as LoopSample;
    } catch {
      return undefined;
    }
  };
  const seq = read()?.seq ?? 0;
  router.child.kill('SIGUSR2');
  let got: LoopSample | undefined;
  await waitUntil(
    () => {
      got = read();
      return Promise.resolve(got !== undefined && got.seq > seq);
    },
    10_000,
    `the loop monitor of ${router.url} to answer`,
  );
  return got ?? { seq, maxMs: NaN, p99Ms: NaN, holds: [] };
}

/** A router's /metrics as scenario (s) reads it. */
export interface Scrape {
  /** Event-loop lag since the previous scrape (prom-client resets its histogram on every scrape). */
  lagMaxMs: number;
  lagP99Ms: number;
  /** CPU seconds used so far. */
  cpuS: number;
  /** Writes of the state file so far that measured their loop hold, and how many held it at most `le` seconds, by `le`. */
  holds: { count: number; le: Map<number, number> };
  /** Garbage collections so far: major ones, and the pause of all kinds (ms). */
  majorGcs: number;
  gcPauseMs: number;
  heapUsedMiB: number;
  /** Full snapshots of the state file written so far, and writes that failed. */
  snapshotsOk: number;
  writeErrors: number;
}

/** Reads `url`'s /metrics: lag, CPU, and the loop holds of its state-file writes (`affinity_router_state_write_loop_hold_seconds`). */
export async function scrape(url: string): Promise<Scrape> {
  // Generous: a router whose loop a synchronous write holds (the code before issue 13 item 4) answers late.
  const r = await simRequest(`${url}/metrics`, { timeoutMs: 300_000 });
  const { samples } = parseProm(r.body.toString('utf8'));
  const get = (name: string): number => samples.find((s) => s.name === name)?.value ?? NaN;
  const le = new Map<number, number>();
  for (const m of samples) {
    if (m.name === 'affinity_router_state_write_loop_hold_seconds_bucket') le.set(Number(m.labels['le']), (le.get(Number(m.labels['le'])) ?? 0) + m.value);
  }
  return {
    lagMaxMs: get('nodejs_eventloop_lag_max_seconds') * 1000,
    lagP99Ms: get('nodejs_eventloop_lag_p99_seconds') * 1000,
    cpuS: get('process_cpu_seconds_total'),
    holds: { count: sum(samples, 'affinity_router_state_write_loop_hold_seconds_count'), le },
    majorGcs: sum(samples, 'nodejs_gc_duration_seconds_count', { kind: 'major' }),
    heapUsedMiB: get('nodejs_heap_size_used_bytes') / 2 ** 20,
    writeErrors: sum(samples, 'affinity_router_state_writes_total', { result: 'error' }),
    snapshotsOk: sum(samples, 'affinity_router_state_writes_total', { kind: 'snapshot', result: 'ok' }),
    gcPauseMs: sum(samples, 'nodejs_gc_duration_seconds_sum') * 1000,
  };
}

/** Adds `n` pins on `slot` to the state file a router wrote (what it would hold after serving `n` sessions). */
function seed(path: string, slot: string, n: number): void {
  const doc = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  const random = seededRandom(13);
  const fd = openSync(path, 'w');
  try {
    writeSync(fd, `${JSON.stringify({ ...doc, sessions: [] }, null, 2).replace(/\[\]\n\}$/, '[\n')}`);
    for (let i = 0; i < n; i += 10_000) {
      const lines: string[] = [];
      for (let k = i; k < Math.min(n, i + 10_000); k++) lines.push(`${k === 0 ? '' : ',\n'}    {"id":"${hexId(random)}","replica":"${slot}"}`);
      writeSync(fd, lines.join(''));
    }
    writeSync(fd, '\n  ]\n}\n');
  } finally {
    closeSync(fd);
  }
}

/** SIGKILLs a launched simulator the router left running (only if that pid is still a simulator). */
export function kill(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('replica')) process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

/** Writes a router config with one local host whose replica is a simulator on a free port. */
export async function fleetConfig(ctx: BenchContext, host: string): Promise<string> {
  const file = join(ctx.tmpDir, `statefile-${host}.json`);
  writeFileSync(file, JSON.stringify({ hosts: [simHost(host, [0], await freePortRange(1))] }, null, 2));
  return file;
}

/**
 * A router that adopted `n` pins: a first router launches the replica and records it in the state
 * file, is SIGKILLed (the replica survives), the pins are appended, and a second router adopts both.
 */
export async function adoptedRouter(
  ctx: BenchContext,
  host: string,
  n: number,
  flags: readonly string[],
  pids: Array<number | undefined>,
): Promise<{ router: Router; stateFile: string }> {
  const stateFile = join(ctx.tmpDir, host, 'state.json');
  const config = await fleetConfig(ctx, host);
  const first = await startRouter(config, [...flags, '--state-file', stateFile]);
  const pid = await replicaPid(first.url);
  pids.push(pid);
  await waitUntil(
    () => (JSON.parse(readFileSync(stateFile, 'utf8')) as { replicas: Array<{ pid: number | null }> }).replicas[0]?.pid === pid,
    10_000,
    'the replica in the state file',
  );
  first.child.kill('SIGKILL');
  await stopChild(first.child, 10_000);
  seed(stateFile, `${host}-d0`, n);
  const t0 = performance.now();
  const router = await startRouter(config, [...flags, '--state-file', stateFile]);
  ctx.log(`s: a router adopted its replica and ${n} pins from ${stateFile} in ${fmt((performance.now() - t0) / 1000, 1)} s`);
  return { router, stateFile };
}

/**
 * The bound on the longest loop hold of the state-file writes between two scrapes: the smallest
 * bucket bound that every write in between is under (Infinity past the last bound, NaN without writes).
 */
export function writeHoldBoundMs(before: Scrape, after: Scrape): number {
  const writes = after.holds.count - before.holds.count;
  if (writes <= 0) return NaN;
  const bounds = [...after.holds.le.keys()].sort((a, b) => a - b);
  const bound = bounds.find((le) => (after.holds.le.get(le) ?? 0) - (before.holds.le.get(le) ?? 0) >= writes);
  return bound === undefined ? NaN : bound * 1000;
}

/**
 * Makes a router's state directory unwritable and writable again, so one router is its own control
 * (the same heap, the same pins, the same history of collections). Unwritable: the directory is
 * moved aside and a plain file takes its name, and the journal (which the router holds open) is
 * removed, so its next append fails and every write after it is a snapshot that fails at its first
 * step (mkdir) before looking at a pin. Writable again: the directory is put back, and the router's
 * next write (within a second, load or not) is a full snapshot with a fresh journal.
 */
export class WriteSwitch {
  private readonly dir: string;
  private writable = true;
  /** Switches made: each sends a request with a session of its own. */
  private switches = 0;

  constructor(
    private readonly router: Router,
    private readonly stateFile: string,
  ) {
    this.dir = dirname(stateFile);
  }

  /**
   * Turns writing on or off, and resolves once the router has made its next write: off, a failed
   * one; on, its snapshot. Both ways wait alike (up to a second, with no load), so neither row's
   * windows follow a pause the other's do not. Resolves to the longest loop hold of that snapshot (ms).
   */
  async set(on: boolean): Promise<number | undefined> {
    if (on === this.writable) return undefined;
    const moved = `${this.dir}.moved`;
    this.writable = on;
    const before = await scrape(this.router.url);
    if (on) {
      rmSync(this.dir);
      renameSync(moved, this.dir);
    } else {
      renameSync(this.dir, moved);
      writeFileSync(this.dir, 'not a directory');
      rmSync(journalPathOf(join(moved, basename(this.stateFile))), { force: true });
      // The next append, and so its failure, needs a changed pin: a new session makes one.
      await simRequest(`${this.router.url}${CHAT_PATH}`, { method: 'POST', body: Buffer.from(chatBodies(1, 256, 1000 + ++this.switches)[0] ?? '') });
    }
    let after = before;
    await waitUntil(
      async () => {
        after = await scrape(this.router.url);
        return on ? after.snapshotsOk > before.snapshotsOk : after.writeErrors > before.writeErrors;
      },
      60_000,
      `${this.router.url} to ${on ? 'write its state file again' : 'fail to write its state file'}`,
    );
    return on ? writeHoldBoundMs(before, after) : undefined;
  }
}
