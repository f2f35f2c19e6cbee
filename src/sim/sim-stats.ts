/**
 * Counters the simulator reports at `GET /__sim/stats` and `GET /metrics`, so tests can check
 * from outside what really reached a replica.
 */
import type { SimFaults } from './sim-faults.js';

/** The last /v1 request received, as it arrived. */
export interface SimLastRequest {
  method: string;
  path: string;
  /** Raw query string without the `?` ("" when none). */
  query: string;
  /** Header names lower-cased; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body_bytes: number;
  body_sha256: string;
}

/** `GET /__sim/stats`. */
export interface SimStats {
  name: string;
  pid: number;
  port: number;
  model: string;
  devices: string | null;
  /** Every /v1 request received. */
  requests: number;
  /** /v1 responses written to the end. */
  completed: number;
  /** /v1 requests whose client went away before the response finished. */
  aborted: number;
  /** /v1 responses the simulator cut itself (`reset_after_chunks`). */
  resets: number;
  /** /v1 requests received and not yet completed, aborted or reset. */
  inflight: number;
  /** Completion requests being generated / queued behind `--max-running`. */
  running: number;
  waiting: number;
  by_path: Record<string, number>;
  /** Counts by `x-session-id` request header, the 10,000 most recent ids. */
  by_session: Record<string, number>;
  /**
   * The KV model's totals over client requests; `warm`: over the requests a router sent to prefill
   * the cache (`x-router-warm: 1`, warm hand-off), which no client waits for.
   */
  cache: { prompt_tokens: number; cached_tokens: number; hit_rate: number; warm: { requests: number; prompt_tokens: number; cached_tokens: number } };
  /** The simulator's own TTFT model (queue wait + base + prefill of uncached tokens). */
  ttft_ms: { count: number; mean: number; p99: number };
  last_request: SimLastRequest | null;
  faults: SimFaults;
}

/** How a /v1 exchange ended. */
export type SimOutcome = 'completed' | 'aborted' | 'reset';

/** Bound of `by_session`. */
export const MAX_TRACKED_SESSIONS = 10_000;
const TTFT_WINDOW = 10_000;

interface RawLast {
  method: string;
  path: string;
  query: string;
  rawHeaders: readonly string[];
  bodyBytes: number;
  bodySha256: string;
}

/** Mutable counters; the snapshot is built only when asked for (hot path stays cheap). */
export class SimStatsRecorder {
  requests = 0;
  completed = 0;
  aborted = 0;
  resets = 0;
  inflight = 0;
  private readonly byPath = new Map<string, number>();
  private readonly bySession = new Map<string, number>();
  private promptTokens = 0;
  private cachedTokens = 0;
  private readonly warm = { requests: 0, prompt_tokens: 0, cached_tokens: 0 };
  private ttftCount = 0;
  private ttftSum = 0;
  private readonly ttftWindow: number[] = [];
  private ttftNext = 0;
  private last: RawLast | null = null;

  /** A /v1 request arrived on `path` (no query) with an optional `x-session-id`. */
  onRequest(path: string, sessionId: string | undefined): void {
    this.requests++;
    this.inflight++;
    this.byPath.set(path, (this.byPath.get(path) ?? 0) + 1);
    if (sessionId !== undefined) {
      const count = (this.bySession.get(sessionId) ?? 0) + 1;
      this.bySession.delete(sessionId);
      this.bySession.set(sessionId, count);
      if (this.bySession.size > MAX_TRACKED_SESSIONS) {
        const oldest = this.bySession.keys().next();
        if (oldest.done !== true) this.bySession.delete(oldest.value);
      }
    }
  }

  /** A /v1 exchange ended; each exchange must call this exactly once. */
  onEnd(outcome: SimOutcome): void {
    this.inflight--;
    if (outcome === 'completed') this.completed++;
    else if (outcome === 'aborted') this.aborted++;
    else this.resets++;
  }

  /** Remembers the request whose body was just read in full. */
  onBody(last: RawLast): void {
    this.last = last;
  }

  /** A completion was admitted: its prompt size, cache hits and modelled TTFT; a `warm` one only in the warm totals. */
  onPrefill(promptTokens: number, cachedTokens: number, ttftMs: number, warm = false): void {
    if (warm) {
      this.warm.requests++;
      this.warm.prompt_tokens += promptTokens;
      this.warm.cached_tokens += cachedTokens;
      return;
    }
    this.promptTokens += promptTokens;
    this.cachedTokens += cachedTokens;
    this.ttftCount++;
    this.ttftSum += ttftMs;
    if (this.ttftWindow.length < TTFT_WINDOW) this.ttftWindow.push(ttftMs);
    else this.ttftWindow[this.ttftNext] = ttftMs;
    this.ttftNext = (this.ttftNext + 1) % TTFT_WINDOW;
  }

  /** The stats document, given identity and live scheduler/fault state. */
  snapshot(identity: Pick<SimStats, 'name' | 'pid' | 'port' | 'model' | 'devices'>, running: number, waiting: number, faults: SimFaults): SimStats {
    const sorted = [...this.ttftWindow].sort((a, b) => a - b);
    const p99 = sorted.length === 0 ? 0 : (sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0);
    return {
      ...identity,
      requests: this.requests,
      completed: this.completed,
      aborted: this.aborted,
      resets: this.resets,
      inflight: this.inflight,
      running,
      waiting,
      by_path: Object.fromEntries(this.byPath),
      by_session: Object.fromEntries(this.bySession),
      cache: {
        prompt_tokens: this.promptTokens,
        cached_tokens: this.cachedTokens,
        hit_rate: this.promptTokens === 0 ? 0 : this.cachedTokens / this.promptTokens,
        warm: { ...this.warm },
      },
      ttft_ms: { count: this.ttftCount, mean: this.ttftCount === 0 ? 0 : this.ttftSum / this.ttftCount, p99 },
      last_request: this.last === null ? null : expandLast(this.last),
      faults: { ...faults },
    };
  }

  /** Prometheus text exposition (`sim_*` plus vLLM-named gauges). */
  metricsText(name: string, running: number, waiting: number): string {
    const label = `{replica="${name.replace(/["\\\n]/g, '_')}"}`;
    const lines = [
      '# HELP sim_requests_total /v1 requests received.',
      '# TYPE sim_requests_total counter',
      `sim_requests_total${label} ${this.requests}`,
      '# HELP sim_requests_aborted_total /v1 requests whose client left early.',
      '# TYPE sim_requests_aborted_total counter',
      `sim_requests_aborted_total${label} ${this.aborted}`,
      '# HELP sim_requests_running Completion requests being generated.',
      '# TYPE sim_requests_running gauge',
      `sim_requests_running${label} ${running}`,
      '# HELP sim_requests_waiting Completion requests queued behind --max-running.',
      '# TYPE sim_requests_waiting gauge',
      `sim_requests_waiting${label} ${waiting}`,
      '# HELP sim_prompt_tokens_total Prompt tokens seen by the KV model.',
      '# TYPE sim_prompt_tokens_total counter',
      `sim_prompt_tokens_total${label} ${this.promptTokens}`,
      '# HELP sim_cached_tokens_total Prompt tokens served from the KV model.',
      '# TYPE sim_cached_tokens_total counter',
      `sim_cached_tokens_total${label} ${this.cachedTokens}`,
      '# HELP vllm:num_requests_running Number of requests currently running.',
      '# TYPE vllm:num_requests_running gauge',
      `vllm:num_requests_running${label} ${running}`,
      '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
      '# TYPE vllm:num_requests_waiting gauge',
      `vllm:num_requests_waiting${label} ${waiting}`,
    ];
    return `${lines.join('\n')}\n`;
  }
}

function expandLast(last: RawLast): SimLastRequest {
  const headers = new Map<string, string>();
  for (let i = 0; i + 1 < last.rawHeaders.length; i += 2) {
    const key = (last.rawHeaders[i] ?? '').toLowerCase();
    const value = last.rawHeaders[i + 1] ?? '';
    const seen = headers.get(key);
    headers.set(key, seen === undefined ? value : `${seen}, ${value}`);
  }
  return {
    method: last.method,
    path: last.path,
    query: last.query,
    headers: Object.fromEntries(headers),
    body_bytes: last.bodyBytes,
    body_sha256: last.bodySha256,
  };
}
