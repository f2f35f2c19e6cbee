/**
 * Router processes of scenario (s): started as an operator starts them (a config with one local
 * host whose replica is a launched simulator), one of them made to adopt N pins from a state file,
 * and what the scenario reads from them (admin API, /metrics).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { simHost } from '../test/support/fleet.js';
import { parseProm } from '../test/support/prom.js';
import { freePortRange } from '../test/support/router-process.js';
import { freePort, simRequest } from '../test/support/sim-process.js';
import { MAIN_ENTRY } from './bench-options.js';
import { answers, stopChild, track, waitUntil } from './processes.js';
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

/**
 * The router's 1 ms event-loop monitor since the previous call (loop-probe.ts): signal it, then
 * wait for its answer file to show the next sequence number.
 */
export async function loopSample(router: Router): Promise<{ maxMs: number; p99Ms: number }> {
  const read = (): { seq: number; maxMs: number; p99Ms: number } | undefined => {
    try {
      return JSON.parse(readFileSync(router.loopFile, 'utf8')) as { seq: number; maxMs: number; p99Ms: number };
    } catch {
      return undefined;
    }
  };
  const seq = read()?.seq ?? 0;
  router.child.kill('SIGUSR2');
  let got: { seq: number; maxMs: number; p99Ms: number } | undefined;
  await waitUntil(
    () => {
      got = read();
      return Promise.resolve(got !== undefined && got.seq > seq);
    },
    10_000,
    `the loop monitor of ${router.url} to answer`,
  );
  return { maxMs: got?.maxMs ?? NaN, p99Ms: got?.p99Ms ?? NaN };
}

/** Event-loop lag since the previous scrape (prom-client resets its histogram on every scrape), and CPU seconds used so far. */
export async function scrape(url: string): Promise<{ lagMaxMs: number; lagP99Ms: number; cpuS: number }> {
  // Generous: a router whose loop a synchronous write holds (the code before issue 13 item 4) answers late.
  const r = await simRequest(`${url}/metrics`, { timeoutMs: 300_000 });
  const { samples } = parseProm(r.body.toString('utf8'));
  const get = (name: string): number => samples.find((s) => s.name === name)?.value ?? NaN;
  return {
    lagMaxMs: get('nodejs_eventloop_lag_max_seconds') * 1000,
    lagP99Ms: get('nodejs_eventloop_lag_p99_seconds') * 1000,
    cpuS: get('process_cpu_seconds_total'),
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
