/**
 * What scenario (w) watches from outside while the load runs: CPU time of a process and of the
 * machine (/proc), RSS and fds of the router, HTTP pollers (the router's `/health`, each
 * simulator's `/health`, one fresh connection per poll, as a load balancer or the router's own
 * probe does), and the router's /metrics scraped every few seconds (over one kept-alive
 * connection, as Prometheus does) for its event-loop delay
 * (prom-client's default `nodejs_eventloop_lag_*` gauges, which restart at every scrape).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseProm, type Sample } from '../test/support/prom.js';
import { processTree, procStats } from './processes.js';

const CLK_TCK = ((): number => {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const n = Number(r.stdout?.trim());
  return Number.isInteger(n) && n > 0 ? n : 100;
})();

/** User + system CPU seconds of one live process so far (/proc/<pid>/stat utime + stime); NaN once it is gone. */
function ownCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at ") "; utime and stime are fields 14 and 15.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / CLK_TCK;
  } catch {
    return NaN;
  }
}

/**
 * User + system CPU seconds a live process and its live descendants (a router's workers) used so
 * far; NaN once the process itself is gone. A descendant that exited meanwhile is not counted.
 */
export function cpuSeconds(pid: number): number {
  let total = ownCpuSeconds(pid);
  if (Number.isNaN(total)) return NaN;
  for (const p of processTree(pid).slice(1)) {
    const own = ownCpuSeconds(p);
    if (!Number.isNaN(own)) total += own;
  }
  return total;
}

/** Busy and total CPU time of the whole machine so far (/proc/stat, every core), in seconds. */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: (total - idle) / CLK_TCK, total: total / CLK_TCK };
}

/**
 * Connections waiting in the accept queue of the socket listening on 127.0.0.1:`port` (the
 * `rx_queue` of its LISTEN row in /proc/net/tcp); NaN when there is no such socket.
 */
export function acceptQueue(port: number): number {
  const local = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[1] === local && f[3] === '0A') return parseInt((f[4] ?? '').split(':')[1] ?? '', 16);
  }
  return NaN;
}

/** The kernel's count of connections dropped because a listen queue was full (every socket of the machine). */
export function listenOverflows(): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
  const head = lines.find((l) => l.startsWith('TcpExt:'));
  const values = lines.find((l, i) => l.startsWith('TcpExt:') && lines[i - 1] === head);
  const i = head?.split(' ').indexOf('ListenOverflows') ?? -1;
  return i < 0 || values === undefined ? NaN : Number(values.split(' ')[i]);
}

/** `GET url` with a bound from its start (connecting included): the status and body, or the error. */
export function httpGet(url: string, agent: http.Agent | false, timeoutMs: number): Promise<{ status: number; body: string } | Error> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
      });
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (e) => {
      clearTimeout(timer);
      resolve(e);
    });
  });
}

/** How a {@link Poller} polls. */
export interface PollOptions {
  readonly intervalMs: number;
  /** A poll that has not answered this long after it started (connecting included) fails (default 5 s). */
  readonly timeoutMs?: number;
  /**
   * false (default): a fresh connection per poll, as a load balancer or kubelet probes, so the poll
   * also waits in the accept queue; true: one kept-alive connection, which isolates the answer.
   */
  readonly keepAlive?: boolean;
  /** A problem with a 200 answer that is still wrong (null when fine). */
  readonly judge?: (body: string) => string | null;
}

/** Polls `GET url` one request at a time, every `intervalMs`, and keeps what went wrong. */
export class Poller {
  polls = 0;
  bad = 0;
  maxMs = 0;
  /** Every poll's latency (ms), answered or not. */
  readonly latencies: number[] = [];
  readonly problems: string[] = [];
  private stopped = false;
  private readonly agent: http.Agent | false;
  private readonly loop: Promise<void>;

  constructor(
    readonly url: string,
    private readonly opts: PollOptions,
  ) {
    this.agent = opts.keepAlive === true ? new http.Agent({ keepAlive: true, maxSockets: 1 }) : false;
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const t = performance.now();
      const problem = await this.poll();
      const ms = performance.now() - t;
      this.polls++;
      this.maxMs = Math.max(this.maxMs, ms);
      this.latencies.push(ms);
      if (problem !== null) {
        this.bad++;
        if (this.problems.length < 10) this.problems.push(`${new Date().toISOString()} ${problem} (after ${Math.round(ms)} ms)`);
      }
      await sleep(Math.max(0, this.opts.intervalMs - ms));
    }
    if (this.agent !== false) this.agent.destroy();
  }

  /** One GET; resolves with the problem, or null when it answered 200 and the judge agreed. */
  private async poll(): Promise<string | null> {
    const r = await httpGet(this.url, this.agent, this.opts.timeoutMs ?? 5_000);
    if (r instanceof Error) return r.message;
    return r.status === 200 ? (this.opts.judge?.(r.body) ?? null) : `status ${r.status}`;
  }

  /** Stops after the poll in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

/** One scrape's event-loop delay, milliseconds beyond prom-client's 10 ms sampling period. */
export interface LagWindow {
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** prom-client samples the loop with a 10 ms timer (`eventLoopMonitoringPrecision`); the period is not delay. */
const LAG_RESOLUTION_MS = 10;

/** Scrapes the router's /metrics every `intervalMs`: event-loop delay windows, and the last samples. */
export class MetricsWatch {
  readonly windows: LagWindow[] = [];
  last: Sample[] = [];
  failures = 0;
  /** Kept alive, as Prometheus scrapes: the windows then measure the loop, not the accept queue. */
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(
    private readonly routerUrl: string,
    private readonly intervalMs: number,
  ) {
    this.loop = this.run();
  }

  /** One scrape now; records its lag window and keeps the samples. */
  async scrape(): Promise<Sample[]> {
    const r = await httpGet(`${this.routerUrl}/metrics`, this.agent, 10_000);
    if (r instanceof Error) throw r;
    if (r.status !== 200) throw new Error(`GET /metrics answered ${r.status}`);
    const samples = parseProm(r.body).samples;
    const value = (name: string): number => samples.find((s) => s.name === name)?.value ?? NaN;
    const lag = (name: string): number => Math.max(0, value(name) * 1000 - LAG_RESOLUTION_MS);
    this.windows.push({ p99Ms: lag('nodejs_eventloop_lag_p99_seconds'), maxMs: lag('nodejs_eventloop_lag_max_seconds') });
    this.last = samples;
    return samples;
  }

  private async run(): Promise<void> {
    // The first scrape only restarts prom-client's histogram (it holds the start-up).
    await this.scrape().catch(() => this.failures++);
    this.windows.length = 0;
    while (!this.stopped) {
      await sleep(this.intervalMs);
      if (this.stopped) break;
      await this.scrape().catch(() => this.failures++);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    this.agent.destroy();
  }
}

/**
 * Samples RSS (MiB) and open fds of a process, and the accept queue of its listening port, every
 * `intervalMs`; keeps the peaks and how many samples found the accept queue at least half full.
 */
export class ProcWatch {
  peakRssMiB = 0;
  peakFds = 0;
  peakAcceptQueue = 0;
  samples = 0;
  /** Samples with ≥ 256 connections waiting to be accepted (Node's default backlog is 511). */
  backloggedSamples = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly pid: number,
    private readonly port: number,
    intervalMs: number,
  ) {
    this.timer = setInterval(() => this.sample(), intervalMs);
  }

  sample(): { rssMiB: number; fds: number } {
    const q = acceptQueue(this.port);
    this.samples++;
    if (q > this.peakAcceptQueue) this.peakAcceptQueue = q;
    if (q >= 256) this.backloggedSamples++;
    try {
      const s = procStats(this.pid);
      this.peakRssMiB = Math.max(this.peakRssMiB, s.rssMiB);
      this.peakFds = Math.max(this.peakFds, s.fds);
      return s;
    } catch {
      return { rssMiB: NaN, fds: NaN };
    }
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
