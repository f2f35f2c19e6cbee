import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from './router.js';
import { collectLogLines } from './log-lines.js';

/** The compiled router entry next to this helper in dist-test. */
export const MAIN_ENTRY = resolve(dirname(fileURLToPath(import.meta.url)), '../../src/main.js');

/** A router running as its own process, as an operator runs it. */
export interface RouterProcess {
  readonly url: string;
  readonly child: ChildProcess;
  readonly pid: number;
  logs(): Array<Record<string, unknown>>;
  stderr(): string;
  waitForLog(pred: (l: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

/** Spawn `node main.js ...args` and resolve once it logs that it is listening. */
export function spawnRouter(args: string[], env: Record<string, string> = {}, timeoutMs = 30_000): Promise<RouterProcess> {
  const child = spawn(process.execPath, [MAIN_ENTRY, '--host', '127.0.0.1', '--port', '0', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  const lines = collectLogLines(child.stdout);
  let err = '';
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.once('exit', (code, signal) => {
      running.delete(child);
      done({ code, signal });
    }),
  );
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const proc: Omit<RouterProcess, 'url'> = {
    child,
    pid: child.pid!,
    logs: () => lines,
    stderr: () => err,
    waitForLog: (pred, t = 10_000) => waitFor(() => lines.find(pred), t, 'router log line'),
    exited: () => exit,
  };
  let gone = false;
  child.once('exit', () => (gone = true));
  return Promise.race([
    // The poll stops once the child exited (the other branch has rejected by then), so a router
    // that exits 2 does not keep the test file alive until the deadline.
    waitFor(() => gone || lines.find((l) => l['event'] === 'listening'), timeoutMs, 'the router to listen').then((l) => {
      if (l === true) return new Promise<never>(() => undefined);
      return { ...proc, url: String(l['url']) };
    }),
    exit.then((e) => {
      throw new Error(`router exited (${e.code ?? e.signal}) before listening: ${err.slice(-2000)}`);
    }),
  ]);
}

export { freePortRange } from '../../src/common/free-port.fake.js';

/** True while a pid exists. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
