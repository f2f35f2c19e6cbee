/**
 * One /v1 request/response exchange of the simulator: completions (stream and non-stream),
 * `/v1/models`, the echo route, and every fault switch that shapes a /v1 response.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { KvCacheModel, tokenize } from './kv-cache.js';
import type { SimFaults } from './sim-faults.js';
import {
  completionBody,
  DONE_EVENT,
  errorBody,
  finishChunk,
  modelsAnswer,
  refuseCompletionBody,
  newCompletionMeta,
  outputToken,
  promptText,
  requestedOutputTokens,
  tokenChunk,
  usageChunk,
  usageOf,
  wantsStream,
  wantsStreamUsage,
  type CompletionKind,
  type CompletionMeta,
  type Usage,
} from './sim-openai.js';
import type { AdmissionQueue, AdmissionTicket } from './sim-scheduler.js';
import type { SimStatsRecorder } from './sim-stats.js';

/** The simulator's pacing (`--ttft-base-ms`, `--prefill-ms-per-token`, `--itl-ms`, `--itl-jitter-ms`). */
export interface SimTiming {
  readonly ttftBaseMs: number;
  readonly prefillMsPerToken: number;
  readonly itlMs: number;
  readonly itlJitterMs: number;
}

/**
 * One inter-token gap: `itlMs` exactly without jitter, else uniform in
 * `[itlMs - itlJitterMs, itlMs + itlJitterMs]` (`random` returns [0, 1), like Math.random).
 */
export function interTokenGap(timing: Pick<SimTiming, 'itlMs' | 'itlJitterMs'>, random: () => number = Math.random): number {
  const { itlMs, itlJitterMs } = timing;
  return itlJitterMs === 0 ? itlMs : itlMs - itlJitterMs + 2 * itlJitterMs * random();
}

/** State shared by every exchange of one simulator. */
export interface SimRuntime {
  readonly servedModel: string;
  /** LoRA adapters served on top of it (`--lora`): models too, listed with `parent`. */
  readonly loras: readonly string[];
  readonly startedAt: number;
  readonly timing: SimTiming;
  readonly outputTokens: number;
  readonly stats: SimStatsRecorder;
  readonly cache: KvCacheModel;
  readonly admission: AdmissionQueue;
  /** Live exchanges, so `close()` can stop their timers. */
  readonly active: Set<SimExchange>;
  /** Current faults (read at every step, so a change applies to requests in flight). */
  faults(): SimFaults;
  /** Called by `die_after_chunks`: the real simulator exits the process. */
  die(): void;
}

const JSON_TYPE = 'application/json';
const COMPLETION_PATHS: Readonly<Record<string, CompletionKind>> = {
  '/v1/chat/completions': 'chat',
  '/v1/completions': 'completion',
};

/** Drives the response to one /v1 request; counts it in stats from construction to close. */
export class SimExchange {
  private timer: NodeJS.Timeout | null = null;
  private ticket: AdmissionTicket | null = null;
  private ended = false;
  private cutBySim = false;
  private written = 0;
  private unflushed = 0;
  private onFlushed: (() => void) | null = null;

  constructor(
    private readonly rt: SimRuntime,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    path: string,
  ) {
    const session = req.headers['x-session-id'];
    rt.stats.onRequest(path, typeof session === 'string' ? session : undefined);
    rt.active.add(this);
    res.on('close', () => this.onClose());
  }

  /** Answers once the body has been read in full (`body` kept only for completion routes). */
  dispatch(path: string, query: string, bodyBytes: number, body: Buffer | null): void {
    const faults = this.rt.faults();
    if (faults.status !== null) {
      const message = `simulated fault: status ${faults.status}`;
      this.sendFull(faults.status, JSON_TYPE, errorBody(faults.status, message));
      return;
    }
    if (faults.hang === 'headers') return; // never answer; the client's departure ends it
    const kind = COMPLETION_PATHS[path];
    const method = this.req.method ?? 'GET';
    if (kind !== undefined) {
      if (method !== 'POST') {
        this.sendFull(405, JSON_TYPE, errorBody(405, `${method} ${path} is not allowed; use POST`));
      } else {
        this.complete(kind, body ?? Buffer.alloc(0));
      }
    } else if (path === '/v1/models' && method === 'GET') {
      this.sendFull(200, JSON_TYPE, modelsAnswer(faults.models_list, this.rt.servedModel, this.rt.startedAt, this.rt.loras));
    } else {
      const echo = { object: 'echo', method, path, query, body_bytes: bodyBytes };
      this.sendFull(200, JSON_TYPE, JSON.stringify(echo));
    }
  }

  /** Stops timers; the server is closing (its sockets are destroyed by the caller). */
  cancel(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private complete(kind: CompletionKind, raw: Buffer): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString('utf8'));
    } catch (err: unknown) {
      const reason = err instanceof Error ? err.message : String(err);
      return this.sendFull(400, JSON_TYPE, errorBody(400, `request body is not valid JSON: ${reason}`));
    }
    const refused = refuseCompletionBody(parsed, this.rt.servedModel, this.rt.loras);
    if (refused !== undefined) return this.sendFull(refused.status, JSON_TYPE, refused.body);
    const body = parsed as Record<string, unknown>;
    const meta = newCompletionMeta(kind, typeof body.model === 'string' ? body.model : this.rt.servedModel);
    const tokens = tokenize(promptText(kind, body));
    const out = requestedOutputTokens(body, this.rt.outputTokens);
    const stream = wantsStream(body);
    const includeUsage = stream && wantsStreamUsage(body);
    if (stream) {
      this.res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
      this.res.flushHeaders();
      if (this.cutIfFaulted()) return;
    }
    const arrived = this.rt.admission.waiting > 0 || this.rt.admission.running > 0 ? performance.now() : -1;
    this.ticket = this.rt.admission.admit(() => {
      if (this.ended) return;
      const queued = arrived < 0 ? 0 : performance.now() - arrived;
      const hit = this.rt.cache.admit(tokens);
      const { ttftBaseMs, prefillMsPerToken, itlMs } = this.rt.timing;
      const prefill = ttftBaseMs + prefillMsPerToken * (hit.promptTokens - hit.cachedTokens);
      this.rt.stats.onPrefill(hit.promptTokens, hit.cachedTokens, queued + prefill, this.req.headers['x-router-warm'] === '1');
      const usage = usageOf(hit.promptTokens, hit.cachedTokens, out.count);
      const finish = out.explicit ? 'length' : 'stop';
      if (stream) {
        this.streamEvent(0, prefill, { meta, count: out.count, finish, usage: includeUsage ? usage : null });
      } else {
        this.after(prefill + itlMs * (out.count - 1), () => {
          let text = '';
          for (let i = 0; i < out.count; i++) text += outputToken(i);
          this.sendFull(200, JSON_TYPE, completionBody(meta, text, finish, usage));
        });
      }
    });
  }

  /**
   * Writes SSE events from `k` on: waits `delay` (+ slow_ms) before event `k` and
   * {@link interTokenGap} between tokens (a non-stream answer waits the mean, `--itl-ms`, per
   * token). Zero waits are written in a loop (no timer, no recursion).
   */
  private streamEvent(k: number, delay: number, plan: StreamPlan): void {
    for (;;) {
      if (this.ended) return;
      const wait = delay + this.rt.faults().slow_ms;
      if (wait > 0) {
        this.after(wait, () => {
          if (this.emit(k, plan)) this.streamEvent(k + 1, this.gapBefore(k + 1, plan), plan);
        });
        return;
      }
      if (!this.emit(k, plan)) return;
      k++;
      delay = this.gapBefore(k, plan);
    }
  }

  /** The inter-token latency before event `k` (0 for the events after the last token). */
  private gapBefore(k: number, plan: StreamPlan): number {
    return k < plan.count ? interTokenGap(this.rt.timing) : 0;
  }

  /** Writes SSE event `k`; false when the stream is over (ended, or stopped by a fault). */
  private emit(k: number, plan: StreamPlan): boolean {
    const { meta, count, finish, usage } = plan;
    const last = k === count + (usage === null ? 1 : 2);
    let event: string;
    if (k < count) event = tokenChunk(meta, k);
    else if (k === count) event = finishChunk(meta, finish, count === 0);
    else if (!last && usage !== null) event = usageChunk(meta, usage);
    else event = DONE_EVENT;
    if (last) {
      this.res.end(event);
      return false;
    }
    this.write(event);
    return !this.cutIfFaulted();
  }

  /** Applies hang-body / die / reset after `this.written` chunks; true when the stream stops. */
  private cutIfFaulted(): boolean {
    const f = this.rt.faults();
    if (f.die_after_chunks !== null && this.written >= f.die_after_chunks) {
      this.whenFlushed(() => this.rt.die());
      return true;
    }
    if (f.reset_after_chunks !== null && this.written >= f.reset_after_chunks) {
      this.whenFlushed(() => this.cut());
      return true;
    }
    return f.hang === 'body' && this.written >= 2;
  }

  /** A complete non-stream answer after slow_ms, unless a body fault cuts it halfway. */
  private sendFull(status: number, contentType: string, payload: string): void {
    this.after(this.rt.faults().slow_ms, () => {
      const f = this.rt.faults();
      const bytes = Buffer.from(payload, 'utf8');
      const headers = { 'content-type': contentType, 'content-length': String(bytes.length) };
      if (f.hang !== 'body' && f.die_after_chunks === null && f.reset_after_chunks === null) {
        this.res.writeHead(status, headers);
        this.res.end(bytes);
        return;
      }
      this.res.writeHead(status, headers);
      this.write(bytes.subarray(0, Math.floor(bytes.length / 2)));
      if (f.die_after_chunks !== null) this.whenFlushed(() => this.rt.die());
      else if (f.reset_after_chunks !== null) this.whenFlushed(() => this.cut());
      // hang: 'body' — stall with half the body sent
    });
  }

  private write(data: string | Buffer): void {
    this.written++;
    this.unflushed++;
    this.res.write(data, () => {
      this.unflushed--;
      if (this.unflushed === 0 && this.onFlushed !== null) {
        const fn = this.onFlushed;
        this.onFlushed = null;
        fn();
      }
    });
  }

  private whenFlushed(fn: () => void): void {
    if (this.unflushed === 0) setImmediate(fn);
    else this.onFlushed = fn;
  }

  /** Destroys this response's socket (the process lives on). */
  private cut(): void {
    if (this.ended) return;
    this.cutBySim = true;
    this.res.socket?.destroy();
  }

  /** Runs `fn` now when `ms` ≤ 0 (hot path), else after `ms` unless the exchange ended. */
  private after(ms: number, fn: () => void): void {
    if (this.ended) return;
    if (ms <= 0) {
      fn();
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.ended) fn();
    }, ms);
  }

  private onClose(): void {
    if (this.ended) return;
    this.ended = true;
    this.cancel();
    this.ticket?.release();
    this.rt.active.delete(this);
    const outcome = this.res.writableFinished ? 'completed' : this.cutBySim ? 'reset' : 'aborted';
    this.rt.stats.onEnd(outcome);
  }
}

interface StreamPlan {
  readonly meta: CompletionMeta;
  readonly count: number;
  readonly finish: string;
  readonly usage: Usage | null;
}
