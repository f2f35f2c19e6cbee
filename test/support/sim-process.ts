/**
 * Test helper: runs the replica simulator as a real child process (`src/sim/replica.js`,
 * compiled beside this helper's tree) and talks to its `/__sim/*` control surface.
 *
 *   const sim = await spawnSim({ name: 'r0', args: ['--itl-ms', '5'] });
 *   after(stopAllSims);
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest, type Agent, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { dirname, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { SimFaultsPatch } from '../../src/sim/sim-faults.js';
import type { SimStats } from '../../src/sim/sim-stats.js';

export type { SimStats } from '../../src/sim/sim-stats.js';
export type { SimFaults, SimFaultsPatch } from '../../src/sim/sim-faults.js';

/** Path of the compiled simulator entry point next to this helper's compiled tree. */
export const SIM_ENTRY = resolve(dirname(fileURLToPath(import.meta.url)), '../../src/sim/replica.js');

const READY_TIMEOUT_MS = 10_000;
const KILL_GRACE_MS = 5_000;
const OUTPUT_LIMIT = 64 * 1024;

/** Options of {@link spawnSim}; `args` come last, so they win over `name`/`port`. */
export interface SpawnSimOptions {
  name?: string;
  /** Extra simulator flags, e.g. `['--itl-ms', '50']`. */
  args?: string[];
  /** Default 0 (ephemeral). */
  port?: number;
}

/** A running simulator child process. */
export interface SimProcess {
  readonly name: string;
  readonly port: number;
  /** `http(s)://127.0.0.1:<port>` (https when `--tls-cert` was passed). */
  readonly url: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** What the child wrote to stdout/stderr so far (last 64 KiB each). */
  output(): { stdout: string; stderr: string };
  /** `GET /__sim/stats`. */
  stats(): Promise<SimStats>;
  /** `POST /__sim/faults`; rejects unless the simulator answers 200. */
  setFaults(f: SimFaultsPatch): Promise<void>;
  /** Sends `signal` (default SIGTERM; SIGKILL after 5 s) and resolves once the child exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Resolves with the exit code (or signal) once the child exited. */
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** A buffered HTTP response. */
export interface SimResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

const running = new Set<ChildProcess>();

process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * Sends one HTTP(S) request (loopback test servers: TLS certificates are not verified) and
 * buffers the whole response. On a fresh connection, unless `agent` is given (a kept-alive
 * agent with `maxSockets: 1` pins every request to one connection).
 */
export function simRequest(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string | Buffer; timeoutMs?: number; agent?: Agent } = {},
): Promise<SimResponse> {
  return new Promise((resolvePromise, reject) => {
    const target = new URL(url);
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(target, { method: init.method ?? 'GET', headers: init.headers, rejectUnauthorized: false, agent: init.agent ?? false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
      res.on('aborted', () => reject(new Error(`${url}: response aborted`)));
    });
    req.setTimeout(init.timeoutMs ?? 10_000, () => req.destroy(new Error(`${url}: no answer in ${init.timeoutMs ?? 10_000} ms`)));
    req.on('error', reject);
    req.end(init.body);
  });
}

/** One SSE event and when it arrived (`performance.now()` ms). */
export interface SseEvent {
  data: string;
  at: number;
}

/** A streaming response being read; `events` grows as events arrive. */
export interface SimStream {
  status: number;
  headers: IncomingHttpHeaders;
  readonly events: SseEvent[];
  /** How the response ended: complete, broken by the server, or destroyed by us. */
  readonly done: Promise<'end' | 'error' | 'destroyed'>;
  /** Resolves once at least `n` events arrived; rejects if the stream ends first or after `timeoutMs`. */
  waitForEvents(n: number, timeoutMs?: number): Promise<void>;
  /** Drops the connection (a client disconnect). */
  destroy(): void;
}

/** Sends a request and reads the response as SSE (`data: ...\n\n`), stamping each event's arrival. */
export function simStream(url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<SimStream> {
  return new Promise((resolvePromise, reject) => {
    const target = new URL(url);
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const headers = { 'content-type': 'application/json', ...init.headers };
    const req = send(target, { method: init.method ?? 'POST', headers, rejectUnauthorized: false, agent: false }, (res) => {
      const events: SseEvent[] = [];
      const waiters = new Set<() => void>();
      let destroyed = false;
      let buffer = '';
      let finished: 'end' | 'error' | 'destroyed' | null = null;
      const done = new Promise<'end' | 'error' | 'destroyed'>((settle) => {
        const finish = (how: 'end' | 'error'): void => {
          if (finished !== null) return;
          finished = destroyed ? 'destroyed' : how;
          for (const wake of waiters) wake();
          settle(finished);
        };
        res.on('end', () => finish('end'));
        res.on('error', () => finish('error'));
        res.on('aborted', () => finish('error'));
        res.on('close', () => finish(res.complete ? 'end' : 'error'));
      });
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        const at = performance.now();
        buffer += text;
        let cut = buffer.indexOf('\n\n');
        while (cut >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          if (frame.startsWith('data: ')) events.push({ data: frame.slice(6), at });
          cut = buffer.indexOf('\n\n');
        }
        for (const wake of waiters) wake();
      });
      resolvePromise({
        status: res.statusCode ?? 0,
        headers: res.headers,
        events,
        done,
        destroy() {
          destroyed = true;
          req.destroy();
        },
        waitForEvents(n, timeoutMs = 10_000) {
          return new Promise<void>((ok, fail) => {
            const check = (): void => {
              if (events.length >= n) {
                cleanup();
                ok();
              } else if (finished !== null) {
                cleanup();
                fail(new Error(`${url}: stream ended (${finished}) after ${events.length} of ${n} events`));
              }
            };
            const timer = setTimeout(() => {
              cleanup();
              fail(new Error(`${url}: ${events.length} of ${n} events within ${timeoutMs} ms`));
            }, timeoutMs);
            const cleanup = (): void => {
              clearTimeout(timer);
              waiters.delete(check);
            };
            waiters.add(check);
            check();
          });
        },
      });
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/**
 * Spawns `node src/sim/replica.js --port <port> [--name <name>] ...args` and resolves once it
 * printed its listening line. Rejects (with the child's stderr) if it exits first or is not
 * ready within 10 s (the child is killed then).
 */
export function spawnSim(opts: SpawnSimOptions = {}): Promise<SimProcess> {
  const args = ['--port', String(opts.port ?? 0)];
  if (opts.name !== undefined) args.push('--name', opts.name);
  args.push(...(opts.args ?? []));
  const tls = args.includes('--tls-cert') || args.some((a) => a.startsWith('--tls-cert='));
  const child = spawn(process.execPath, [SIM_ENTRY, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let stdout = '';
  let stderr = '';
  const keep = (prev: string, more: string): string => (prev + more).slice(-OUTPUT_LIMIT);
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr = keep(stderr, s)));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => {
    child.once('exit', (code, signal) => {
      running.delete(child);
      done({ code, signal });
    });
  });

  return new Promise<SimProcess>((resolvePromise, reject) => {
    let settled = false;
    const fail = (message: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${message}\nsimulator args: ${args.join(' ')}\nstderr:\n${stderr}`));
    };
    const timer = setTimeout(() => fail(`simulator not listening within ${READY_TIMEOUT_MS} ms`), READY_TIMEOUT_MS);
    child.once('error', (err) => fail(`cannot spawn the simulator: ${err.message}`));
    child.once('exit', (code, signal) => {
      // Let stderr drain before reporting it.
      setImmediate(() => fail(`simulator exited before listening (code ${code}, signal ${signal})`));
    });
    const lines = createInterface({ input: child.stdout ?? process.stdin });
    lines.on('line', (line) => {
      stdout = keep(stdout, `${line}\n`);
      if (settled || !line.startsWith('{')) return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        return;
      }
      if (!isListening(parsed)) return;
      settled = true;
      clearTimeout(timer);
      const url = `${tls ? 'https' : 'http'}://127.0.0.1:${parsed.port}`;
      resolvePromise(makeSimProcess(child, parsed, url, exit, () => ({ stdout, stderr })));
    });
  });
}

interface ListeningLine {
  event: 'listening';
  name: string;
  port: number;
  pid: number;
}

function isListening(value: unknown): value is ListeningLine {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return v.event === 'listening' && typeof v.name === 'string' && typeof v.port === 'number' && typeof v.pid === 'number';
}

function makeSimProcess(
  child: ChildProcess,
  line: ListeningLine,
  url: string,
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>,
  output: () => { stdout: string; stderr: string },
): SimProcess {
  return {
    name: line.name,
    port: line.port,
    url,
    pid: line.pid,
    child,
    output,
    exited: () => exit,
    async stats() {
      const res = await simRequest(`${url}/__sim/stats`);
      if (res.status !== 200) throw new Error(`${line.name}: GET /__sim/stats answered ${res.status}`);
      return JSON.parse(res.body.toString('utf8')) as SimStats;
    },
    async setFaults(f) {
      const res = await simRequest(`${url}/__sim/faults`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(f),
      });
      if (res.status !== 200) {
        throw new Error(`${line.name}: POST /__sim/faults answered ${res.status}: ${res.body.toString('utf8')}`);
      }
    },
    async kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const grace = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
      await exit;
      clearTimeout(grace);
    },
  };
}

/** Kills every simulator this helper started (SIGTERM, SIGKILL after 5 s); resolves when all exited. */
export async function stopAllSims(): Promise<void> {
  await Promise.all(
    [...running].map(
      (child) =>
        new Promise<void>((done) => {
          if (child.exitCode !== null || child.signalCode !== null) {
            running.delete(child);
            done();
            return;
          }
          const grace = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
          child.once('exit', () => {
            clearTimeout(grace);
            done();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
}

export { freePort } from '../../src/common/free-port.fake.js';

/** Tries one TCP connection to 127.0.0.1:`port`: 'open', or the error code (ECONNREFUSED when nothing listens). */
export function tcpProbe(port: number): Promise<string> {
  return new Promise((resolvePromise) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolvePromise('open');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolvePromise(err.code ?? err.message));
  });
}
