/**
 * Test helpers for the launcher specs: a tiny stand-in replica program (`node -e <script>`) and
 * HostSpec/SlotSpec builders, polling and cleanup. Test-only (`*.fake.ts` is not in the prod build).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import type { HostSpec, SlotSpec } from '../../../config/router-config.js';
import { tempDir } from '../../../common/temp-dir.fake.js';

/**
 * Prints `REPLICA {json}` (pid, argv, cwd, LAUNCHER_TEST_FOO, names of ROUTER_* vars) on stdout
 * and a line on stderr, then idles. `--grandchild` spawns an idle grandchild (its pid in the json),
 * `--ignore-term` ignores SIGTERM.
 */
export const REPLICA_SCRIPT = [
  "const { spawn } = require('child_process');",
  'const args = process.argv.slice(1);',
  'const info = { pid: process.pid, argv: args, cwd: process.cwd(), foo: process.env.LAUNCHER_TEST_FOO ?? null,',
  "  router: Object.keys(process.env).filter((k) => k.startsWith('ROUTER_')) };",
  "if (args.includes('--ignore-term')) process.on('SIGTERM', () => console.log('ignored SIGTERM'));",
  "if (args.includes('--grandchild')) {",
  "  const g = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });",
  '  info.grandchild = g.pid;',
  '}',
  "console.log('REPLICA ' + JSON.stringify(info));",
  "console.error('STDERR-LINE from ' + process.pid);",
  'setInterval(() => {}, 1000);',
].join('\n');

/** argv running the stand-in replica with `extra` arguments. */
export function replicaArgv(extra: readonly string[] = []): string[] {
  return [process.execPath, '-e', REPLICA_SCRIPT, '--', ...extra];
}

/** What the stand-in replica reported about itself. */
export interface ReplicaReport {
  readonly pid: number;
  readonly argv: string[];
  readonly cwd: string;
  readonly foo: string | null;
  readonly router: string[];
  readonly grandchild?: number;
}

/** Parse the `REPLICA {json}` line out of a log text, or undefined if it is not there yet. */
export function parseReport(logText: string): ReplicaReport | undefined {
  const line = logText.split('\n').find((l) => l.startsWith('REPLICA '));
  return line === undefined ? undefined : (JSON.parse(line.slice('REPLICA '.length)) as ReplicaReport);
}

/** Poll `probe` until it returns a value other than undefined/false, or fail after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(25);
  }
}

/** Wait until the local log holds the replica's report. */
export function waitForReport(logPath: string, timeoutMs = 10_000): Promise<ReplicaReport> {
  return waitFor(
    `the replica report in ${logPath}`,
    () => {
      try {
        return parseReport(readFileSync(logPath, 'utf8'));
      } catch {
        return undefined;
      }
    },
    timeoutMs,
  );
}

/**
 * True when no process `pid` exists any more. A zombie counts as gone: a replica whose router was
 * killed is reparented to PID 1, which in a container may never reap it.
 */
export function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return process.platform === 'linux';
  }
}

/** Best-effort SIGKILL of a process group and of single pids (test cleanup). */
export function killQuietly(...pids: Array<number | undefined>): void {
  for (const pid of pids) {
    if (pid === undefined || pid <= 1) continue;
    for (const target of [-pid, pid]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}

/** The SlotSpec of device 0 of `host`. */
export function testSlot(host: HostSpec): SlotSpec {
  return {
    name: `${host.name}-d0`,
    host: host.name,
    devices: [0],
    port: host.portBase,
    address: host.ssh === null ? '127.0.0.1' : host.ssh.slice(host.ssh.lastIndexOf('@') + 1),
    local: host.ssh === null,
  };
}

/**
 * Await `promise` with a deadline. Also keeps the event loop alive while waiting, which matters
 * for `exited` of an unref()ed child: nothing else would hold the test process open.
 */
export async function within<T>(what: string, promise: Promise<T> | undefined, timeoutMs = 10_000): Promise<T> {
  if (promise === undefined) throw new Error(`${what}: no promise to wait for`);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Test cleanup that does not trust the pid under test: kill whatever the stand-in replica that
 * wrote `logPath` reported as its own pid and grandchild (the log is local even for ssh tests).
 */
export function killReplicaOf(logPath: string): void {
  let report: ReplicaReport | undefined;
  try {
    report = parseReport(readFileSync(logPath, 'utf8'));
  } catch {
    return;
  }
  if (report !== undefined) killQuietly(report.pid, report.grandchild);
}

/**
 * A temp dir removed after the test; before removing it, every stand-in replica that reported
 * itself in a `*.log` below it is killed, so a test that fails half-way leaks no process.
 */
export function replicaTempDir(t: TestContext, prefix: string): string {
  const dir = tempDir(prefix);
  t.after(async () => {
    const entries = await readdir(dir, { recursive: true }).catch(() => [] as string[]);
    for (const entry of entries) if (entry.endsWith('.log')) killReplicaOf(join(dir, entry));
    await rm(dir, { recursive: true, force: true });
  });
  return dir;
}

/** A process group like a wrapped launch: `sh` (the leader) whose child listens on `port`. */
export interface ListenerGroup {
  readonly leader: number;
  readonly listener: number;
  readonly port: number;
  /** A port nothing listens on. */
  readonly closedPort: number;
}

/** Start a ListenerGroup (killed after the test). */
export async function listenerInGroup(t: TestContext): Promise<ListenerGroup> {
  const listen = "const s = require('net').createServer().listen(0, '127.0.0.1', () => console.log(process.pid + ' ' + s.address().port));";
  const leader = spawn('/bin/sh', ['-c', `"$0" -e "$1" & wait`, process.execPath, listen], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  t.after(() => killQuietly(leader.pid));
  let out = '';
  leader.stdout.on('data', (c: Buffer) => (out += c.toString()));
  const [listener, port] = await waitFor('the wrapped listener to report its port', () => (/^(\d+) (\d+)\n/.exec(out) ?? undefined)?.slice(1).map(Number));
  const closedPort = await new Promise<number>((done) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => done(typeof a === 'object' && a !== null ? a.port : 1));
    });
  });
  return { leader: leader.pid!, listener: listener, port: port, closedPort };
}
