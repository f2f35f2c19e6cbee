/**
 * The load scenario of the reliability suite (issue 7, scenario 11), reusable: the CI test
 * (`load.test.ts`) and the soak (`soak.ts`) both call {@link runLoad}.
 *
 * Each virtual client owns one keep-alive connection (its own agent, one socket) and sends
 * requests back to back until the deadline: a mix of SSE streams and short non-stream
 * completions. Every answer is checked from outside: a 5xx, a reset, a stream without `[DONE]`
 * or a body shorter than its `Content-Length` counts as a failure.
 *
 * Also here, because both callers need them: a quiet router process (its per-request log lines are
 * counted, not kept), /proc sampling of RSS and open fds, and a /metrics scrape.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync } from 'node:fs';
import { Agent, request, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { MAIN_ENTRY } from '../support/router-process.js';
import { parseProm, sum, type Sample } from '../support/prom.js';
import { simRequest } from '../support/sim-process.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

/** How {@link runLoad} chooses session ids. */
export type SessionMode = 'unique' | { readonly pool: number };

/** Options of {@link runLoad}. */
export interface LoadOptions {
  /** Router base URL, e.g. `http://127.0.0.1:8000`. */
  readonly url: string;
  /** Concurrent client connections (each sends one request at a time). */
  readonly connections: number;
  /** How long clients keep starting new requests once every connection is open. */
  readonly durationMs: number;
  /** Share of requests that are SSE streams (default 0.3). */
  readonly streamShare?: number;
  /** `unique`: a new session id per request; `{pool}`: ids drawn from a fixed set (default pool = connections). */
  readonly sessions?: SessionMode;
  /** Completion lengths (default stream 8, short 2). */
  readonly maxTokens?: { readonly stream: number; readonly short: number };
  /** At most this many clients open their connection (first request) at a time (default 50). */
  readonly openConcurrency?: number;
  /** A request taking longer than this counts as a failure (default 60 s). */
  readonly requestTimeoutMs?: number;
  /** Called once every connection is open, just before the load phase starts. */
  readonly onLoadStart?: () => void;
}

/** Counts of what the clients saw. */
interface Counters {
  /** Requests written to the router. */
  sent: number;
  /** 200 answers that were complete (streams ending with `[DONE]`, bodies of their full length). */
  ok: number;
  streams: number;
  /** 5xx answers (none is acceptable from a healthy fleet). */
  serverErrors: number;
  /** Connection-level failures: resets, `socket hang up`, refused. */
  resets: number;
  /** Responses that started but did not complete (including streams without `[DONE]`). */
  incomplete: number;
  /** Requests over `requestTimeoutMs`. */
  timeouts: number;
}

/** What the clients saw. */
export interface LoadResult extends Readonly<Counters> {
  readonly byStatus: Readonly<Record<string, number>>;
  /** Up to 20 distinct failure descriptions. */
  readonly failures: readonly string[];
  readonly latencyMs: { readonly p50: number; readonly p99: number; readonly max: number };
  readonly elapsedMs: number;
}

interface Tally extends Counters {
  byStatus: Record<string, number>;
  failures: Set<string>;
  latencies: number[];
}

const MAX_LATENCY_SAMPLES = 200_000;
let uniqueCounter = 0;

/**
 * Runs the mixed load and resolves once every request sent has ended. First every client opens
 * its connection with one short request, `openConcurrency` at a time, and waits for the others;
 * then all clients send back to back for `durationMs`. (Node accepts about one connection per
 * event-loop turn, so a busy server accepts a burst of new connections slowly: opening 2,000 at
 * once would overflow its listen backlog and measure that, not the router.)
 */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const t: Tally = { sent: 0, ok: 0, streams: 0, byStatus: {}, serverErrors: 0, resets: 0, incomplete: 0, timeouts: 0, failures: new Set(), latencies: [] };
  const started = performance.now();
  const opening = semaphore(opts.openConcurrency ?? 50);
  let connected = 0;
  let release: () => void = () => undefined;
  const allConnected = new Promise<void>((r) => (release = r));
  const arrive = (): void => {
    if (++connected === opts.connections) release();
  };
  let deadline = Infinity;
  const loadStart = allConnected.then(() => {
    opts.onLoadStart?.();
    deadline = performance.now() + opts.durationMs;
  });
  const clients = Array.from({ length: opts.connections }, (_, i) => runClient(i, opts, t, opening, arrive, loadStart, () => deadline));
  await Promise.all(clients);
  const sorted = t.latencies.sort((a, b) => a - b);
  const pct = (p: number): number => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]);
  const { byStatus, failures, latencies: _, ...counters } = t;
  return {
    ...counters,
    byStatus,
    failures: [...failures],
    latencyMs: { p50: round(pct(0.5)), p99: round(pct(0.99)), max: round(sorted.at(-1) ?? 0) },
    elapsedMs: round(performance.now() - started),
  };
}

async function runClient(
  i: number,
  opts: LoadOptions,
  t: Tally,
  opening: Semaphore,
  arrive: () => void,
  loadStart: Promise<void>,
  deadline: () => number,
): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const mode = opts.sessions ?? { pool: opts.connections };
    let n = 0;
    const next = (stream: boolean): Promise<void> => {
      const session = mode === 'unique' ? `u-${process.pid}-${++uniqueCounter}` : `p-${(i + n * 7919) % mode.pool}`;
      n++;
      return oneRequest(agent, opts, t, stream, session);
    };
    await opening.acquire();
    try {
      await next(false);
    } finally {
      opening.release();
    }
    arrive();
    await loadStart;
    while (performance.now() < deadline()) {
      await next(Math.random() < (opts.streamShare ?? 0.3));
    }
  } finally {
    agent.destroy();
  }
}

function oneRequest(agent: Agent, opts: LoadOptions, t: Tally, stream: boolean, session: string): Promise<void> {
  const tokens = opts.maxTokens ?? { stream: 8, short: 2 };
  const body = Buffer.from(
    JSON.stringify({ model: 'sim-model', stream, max_tokens: stream ? tokens.stream : tokens.short, messages: [{ role: 'user', content: `load ${session}` }] }),
  );
  const fail = (what: string): void => {
    if (t.failures.size < 20) t.failures.add(what);
  };
  const t0 = performance.now();
  return new Promise<void>((done) => {
    let settled = false;
    const finish = (): void => {
      if (settled) return;
      settled = true;
      if (t.latencies.length < MAX_LATENCY_SAMPLES) t.latencies.push(performance.now() - t0);
      done();
    };
    const req = request(
      `${opts.url}/v1/chat/completions`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': String(body.length), 'x-session-id': session } },
      (res: IncomingMessage) => {
        const status = res.statusCode ?? 0;
        t.byStatus[status] = (t.byStatus[status] ?? 0) + 1;
        if (status >= 500) {
          t.serverErrors++;
          fail(`${status} from ${res.headers['x-replica-name'] === undefined ? 'the router' : 'a replica'}`);
        }
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('close', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const complete = res.complete && (!stream || status !== 200 || (text.endsWith('data: [DONE]\n\n') && !text.includes('"error"')));
          if (!complete) {
            t.incomplete++;
            fail(`${stream ? 'stream' : 'response'} ended incomplete (status ${status}, ${text.length} bytes)`);
          } else if (status === 200) {
            t.ok++;
            if (stream) t.streams++;
          }
          finish();
        });
      },
    );
    req.setTimeout(opts.requestTimeoutMs ?? 60_000, () => {
      t.timeouts++;
      fail(`no answer within ${opts.requestTimeoutMs ?? 60_000} ms`);
      req.destroy(new Error('client timeout'));
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      if (e.message !== 'client timeout') {
        t.resets++;
        fail(`connection error: ${e.code ?? e.message} (${req.reusedSocket ? 'reused' : 'new'} connection)`);
      }
      finish();
    });
    t.sent++;
    req.end(body);
  });
}

/** A router process whose log goes to a file. */
export interface QuietRouter {
  readonly url: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** The file holding the router's stdout (JSON log lines). */
  readonly logFile: string;
  /** Lines at level warn or above that are not per-request lines (first 200), and stderr. */
  problems(): { lines: string[]; stderr: string };
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit. Removes the log unless `keepLog`. */
  stop(graceMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Spawns `node main.js --host 127.0.0.1 --port 0 ...args` with stdout and stderr going to files,
 * and resolves once it logged that it listens. (A pipe read by the busy load generator would
 * stall the router on its own per-request log writes.)
 */
export async function startQuietRouter(
  args: readonly string[],
  opts: { env?: Record<string, string>; keepLog?: boolean } = {},
  timeoutMs = 30_000,
): Promise<QuietRouter> {
  // A kept log must outlive this process: the per-process temp root is removed at exit.
  const dir = opts.keepLog === true ? mkdtempSync(join(tmpdir(), 'ar-load-')) : tempDir('ar-load-');
  const logFile = join(dir, 'router.log');
  const errFile = join(dir, 'router.err');
  const out = openSync(logFile, 'a');
  const err = openSync(errFile, 'a');
  const child = spawn(process.execPath, [MAIN_ENTRY, '--host', '127.0.0.1', '--port', '0', ...args], {
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', out, err],
  });
  closeSync(out);
  closeSync(err);
  running.add(child);
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => {
      running.delete(child);
      r({ code, signal });
    }),
  );
  const stderr = (): string => readFileSync(errFile, 'utf8').slice(-64 * 1024);
  let exited = false;
  child.once('exit', () => (exited = true));
  let listening: string | undefined;
  for (const deadline = performance.now() + timeoutMs; listening === undefined; await sleep(50)) {
    if (exited || performance.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`router ${exited ? 'exited' : `not listening within ${timeoutMs} ms`}: ${stderr().slice(-2000)}`);
    }
    const line = readFileSync(logFile, 'utf8')
      .split('\n')
      .find((l) => l.includes('"event":"listening"'));
    if (line !== undefined) listening = String((JSON.parse(line) as Record<string, unknown>)['url']);
  }
  return {
    url: listening,
    pid: child.pid!,
    child,
    logFile,
    problems: () => ({ lines: warnLines(logFile), stderr: stderr() }),
    async stop(graceMs = 10_000) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exit;
        clearTimeout(t);
      }
      if (opts.keepLog !== true) rmSync(dir, { recursive: true, force: true });
      return exit;
    },
  };
}

/** Warn-or-worse lines of a JSON log file that are not per-request lines (first 200); read in 1 MiB chunks. */
function warnLines(file: string): string[] {
  const kept: string[] = [];
  const fd = openSync(file, 'r');
  const buf = Buffer.alloc(1 << 20);
  let partial = '';
  try {
    for (let n = readSync(fd, buf); n > 0 && kept.length < 200; n = readSync(fd, buf)) {
      const lines = (partial + buf.toString('utf8', 0, n)).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) if (!line.includes('"event":"request"') && /"level":(4|5|6)\d/.test(line) && kept.length < 200) kept.push(line);
    }
  } finally {
    closeSync(fd);
  }
  return kept;
}

const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

/** Resident memory and open file descriptors of a process, from /proc. */
export function procSample(pid: number): { rssBytes: number; fds: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1] ?? NaN);
  return { rssBytes: kb * 1024, fds: readdirSync(`/proc/${pid}/fd`).length };
}

/** The soft open-files limit of this process (inherited by the processes it spawns). */
export function openFileLimit(): number {
  const line = /^Max open files\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
  return line?.[1] === 'unlimited' ? Infinity : Number(line?.[1] ?? 0);
}

/** Parsed `GET /metrics` of a router. */
export async function scrapeMetrics(url: string): Promise<Sample[]> {
  const r = await simRequest(`${url}/metrics`, { timeoutMs: 30_000 });
  if (r.status !== 200) throw new Error(`GET ${url}/metrics answered ${r.status}`);
  return parseProm(r.body.toString('utf8')).samples;
}

/** The accounting invariant of contract §9: received, Σ terminations, in-flight. */
export async function accounting(url: string): Promise<{ received: number; terminated: number; inflight: number; byCause: Record<string, number> }> {
  const s = await scrapeMetrics(url);
  const byCause: Record<string, number> = {};
  for (const x of s) if (x.name === 'affinity_router_request_terminations_total') byCause[x.labels['cause'] ?? '?'] = x.value;
  return {
    received: sum(s, 'affinity_router_requests_received_total'),
    terminated: sum(s, 'affinity_router_request_terminations_total'),
    inflight: sum(s, 'affinity_router_replica_inflight'),
    byCause,
  };
}

interface Semaphore {
  acquire(): Promise<void>;
  release(): void;
}

/** At most `n` holders at a time; waiters are served in order. */
function semaphore(n: number): Semaphore {
  let free = n;
  const waiting: Array<() => void> = [];
  return {
    acquire: () => (free > 0 ? (free--, Promise.resolve()) : new Promise<void>((r) => waiting.push(r))),
    release: () => {
      const next = waiting.shift();
      if (next !== undefined) next();
      else free++;
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}
