/**
 * Processes the bench starts and watches: simulators (via the test helper), the router run as
 * an operator runs it (`node dist-test/src/main.js --config ...`), generic readiness polling, and
 * RSS / open-fd readings from /proc. Every child is killed when the bench process exits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, simRequest, spawnSim, type SimProcess } from '../test/support/sim-process.js';
import { MAIN_ENTRY } from './bench-options.js';
import type { BenchContext } from './scenario.js';

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** Registers a child so it is SIGKILLed if the bench exits without stopping it. */
export function track(child: ChildProcess): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/** Resolves once `child` exited; SIGTERM first, SIGKILL after `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Polls `probe` every 50 ms until it returns true; throws naming `what` after `timeoutMs`. */
export async function waitUntil(probe: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** True when `GET url` answers `status` (connection errors count as false). */
export async function answers(url: string, status = 200): Promise<boolean> {
  try {
    return (await simRequest(url, { timeoutMs: 2_000 })).status === status;
  } catch {
    return false;
  }
}

/**
 * `pid` and every live descendant (from /proc/<pid>/task/<tid>/children): a router started with
 * `--workers N` is its primary and N forked workers, and its cost is theirs together.
 */
export function processTree(pid: number): number[] {
  const out: number[] = [];
  const visit = (p: number): void => {
    out.push(p);
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return; // gone meanwhile
    }
    for (const t of tasks) {
      let children: string;
      try {
        children = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const c of children.split(' ')) if (c.trim() !== '') visit(Number(c));
    }
  };
  visit(pid);
  return out;
}

/** utime + stime of `pid`, in seconds (Linux reports them in ticks of 1/100 s). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Resident set size (MiB) and open file descriptors of a live process and its descendants, from /proc. */
export function procStats(pid: number): { rssMiB: number; fds: number } {
  let rssMiB = 0;
  let fds = 0;
  for (const p of processTree(pid)) {
    let status: string;
    try {
      status = readFileSync(`/proc/${p}/status`, 'utf8');
      fds += readdirSync(`/proc/${p}/fd`).length;
    } catch (e: unknown) {
      if (p === pid) throw e;
      continue; // a descendant that exited meanwhile
    }
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    if (m === null) throw new Error(`/proc/${p}/status has no VmRSS line`);
    rssMiB += Number(m[1]) / 1024;
  }
  return { rssMiB, fds };
}

/** Starts `n` simulators named `<prefix><i>` with the same extra flags. */
export async function startSims(n: number, args: string[], prefix = 'sim'): Promise<SimProcess[]> {
  const sims: SimProcess[] = [];
  try {
    for (let i = 0; i < n; i++) sims.push(await spawnSim({ name: `${prefix}${i}`, args }));
  } catch (e: unknown) {
    await stopSims(sims);
    throw e;
  }
  return sims;
}

/** Stops the given simulators and waits until they exited. */
export async function stopSims(sims: readonly SimProcess[]): Promise<void> {
  await Promise.all(sims.map((s) => s.kill()));
}

/** A router child process. */
export interface BenchRouter {
  readonly url: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** Last 64 KiB of stderr + stdout (warnings only at `--log-level warn`). */
  output(): string;
  /** SIGTERM, SIGKILL after 10 s; resolves once it exited. */
  stop(): Promise<void>;
}

let routerSeq = 0;

/**
 * Writes a config with `sims` as static replicas and starts the router on a free loopback port
 * (`--log-level warn`, so the per-request info line is not written), resolving once `/readyz`
 * answers 200. `--workers` comes from the bench's own `--workers`; extra `flags` go last (they win). `nodeArgs` go before the entry (e.g. profiling).
 */
export async function startRouter(
  ctx: BenchContext,
  sims: readonly SimProcess[],
  flags: readonly string[] = [],
  nodeArgs: readonly string[] = [],
  /** Merged into the config file (e.g. `{ routing: { speed_aware: false } }`, which no flag can say). */
  extraConfig: Record<string, unknown> = {},
  /** The compiled `main.js` to run: this checkout's, or another build's (bench/ab-builds.ts). */
  entry = MAIN_ENTRY,
): Promise<BenchRouter> {
  const config = { replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })), ...extraConfig };
  const file = join(ctx.tmpDir, `router-${++routerSeq}.json`);
  writeFileSync(file, JSON.stringify(config, null, 2));
  const port = await freePort();
  const workers = ctx.options.workers === 1 ? [] : ['--workers', String(ctx.options.workers)];
  const args = [...nodeArgs, entry, '--config', file, '--host', '127.0.0.1', '--port', String(port), '--log-level', 'warn', ...workers, ...flags];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  let out = '';
  const keep = (s: Buffer): void => {
    out = (out + s.toString('utf8')).slice(-64 * 1024);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntil(
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`router exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${out.slice(-2000)}`);
        }
        return answers(`${url}/readyz`);
      },
      30_000,
      `the router on ${url} to answer /readyz 200`,
    );
  } catch (e: unknown) {
    await stopChild(child, 2_000);
    throw e;
  }
  return { url, pid: child.pid ?? -1, child, output: () => out, stop: () => stopChild(child) };
}

/**
 * Runs a compiled measuring child (`node --expose-gc <entry> <args>`, tracked like every bench
 * process) and resolves the JSON of the last line it printed; `isReport` checks its shape. Rejects
 * with the child's stderr (else stdout) tail when it exits non-zero or prints no such line.
 */
export function runReportChild<T>(entry: string, args: readonly string[], isReport: (v: unknown) => v is T): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', entry, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    track(child);
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString('utf8')));
    child.stderr.on('data', (b: Buffer) => (err += b.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(out.trim().split('\n').pop() ?? '');
      } catch {
        parsed = undefined;
      }
      if (code === 0 && isReport(parsed)) resolve(parsed);
      else reject(new Error(`${basename(entry)} exited ${code} without a report: ${err.slice(-2000) || out.slice(-2000)}`));
    });
  });
}

/** A report guard that only checks for an object (the child and its reader are compiled together). */
export function isObject<T>(v: unknown): v is T {
  return typeof v === 'object' && v !== null;
}
