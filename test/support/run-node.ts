/**
 * Runs a built entry point (main.js, bench/run.js) as a child Node process to its exit, with a
 * deadline: a process still alive then is killed and the promise rejects, so a hang fails the test
 * instead of stalling the suite. `killRunning()` (from an `after` hook) ends any still running.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunOptions {
  readonly deadlineMs: number;
  /** The child's whole environment (default: this process's). */
  readonly env?: NodeJS.ProcessEnv;
  /** Sent at the deadline (default SIGKILL; SIGINT lets the bench clean up its own children). */
  readonly killSignal?: NodeJS.Signals;
}

const running = new Set<ChildProcess>();

export function runNode(entry: string, args: readonly string[], opts: RunOptions): Promise<Exit> {
  assert.ok(existsSync(entry), `${entry} is not built (npx tsc -p tsconfig.test.json)`);
  const child = spawn(process.execPath, [entry, ...args], { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill(opts.killSignal ?? 'SIGKILL');
      reject(new Error(`${entry} ${args.join(' ')} did not exit within ${opts.deadlineMs} ms; stderr: ${stderr}`));
    }, opts.deadlineMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

export function killRunning(): void {
  for (const c of running) c.kill('SIGKILL');
}
