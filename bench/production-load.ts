/**
 * The client side of the production-shaped scenario (w) and of its short CI variant
 * (test/reliability/production.test.ts): multi-turn chat conversations streamed through a proxy.
 *
 *  - `streams` resident clients, each with one stream open at a time: a conversation of a few
 *    turns, then the next conversation, back to back (they start spread over `rampMs`, as clients
 *    arrive, instead of in one burst against the router's listen backlog);
 *  - plus new conversations arriving as a Poisson process at `newSessionsPerS`, each ending after
 *    its turns;
 *  - a conversation carries its id in `X-Session-Id`, in the body's `session_id`, or not at all
 *    (an OpenAI client that re-sends the history; the router routes it by prefix), drawn per
 *    conversation; every turn re-sends the whole history (system prompt of varied length, so the
 *    simulator's prefill time varies);
 *  - `abortShare` of the streams are dropped by the client after a random number of events.
 *
 * Every request ends in exactly one client-side outcome: completed (200, complete, last event
 * `data: [DONE]`), aborted (by this client, mid-stream), or an error counted by kind.
 */
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { exponential, seededRandom, summarize, type Summary } from './stats.js';
import { hexId } from './workload.js';

/** What to offer. Ranges are `[min, max]`, drawn uniformly (integers). */
export interface ProductionLoadSpec {
  /** Base URL of the proxy under test. */
  readonly url: string;
  readonly streams: number;
  readonly newSessionsPerS: number;
  /** Resident clients start spread over this long; then the load runs `durationMs`. */
  readonly rampMs: number;
  /** After the ramp: no turn starts later; streams in flight then finish (the drain). */
  readonly durationMs: number;
  readonly seed: number;
  /** Share of conversations that carry an id (half in the header, half in the body). */
  readonly sessionIdShare: number;
  readonly abortShare: number;
  readonly turns: readonly [number, number];
  readonly systemWords: readonly [number, number];
  readonly userWords: readonly [number, number];
  readonly outputTokens: readonly [number, number];
  /** A stream silent for this long is destroyed and counted as an error. */
  readonly idleTimeoutMs: number;
  /**
   * When set, every request carries `X-Request-Id: w<seed>-<n>` (the router keeps a valid incoming
   * id and logs it) and this file receives one `<id>\t<outcome>` line per request at the end, so
   * the bench can join what the client saw with the router's log, request by request.
   */
  readonly outcomesFile?: string;
}

/** A snapshot of the counters, taken every second (and at each phase change). */
export interface ProductionProgress {
  readonly phase: 'ramp' | 'steady' | 'drain' | 'done';
  /** Milliseconds since the load started. */
  readonly atMs: number;
  readonly sent: number;
  readonly completed: number;
  readonly aborted: number;
  readonly errors: number;
  /** SSE events (`data:` frames) received so far: the chunks the proxy relayed. */
  readonly events: number;
  /** Streams open right now. */
  readonly open: number;
}

/** Everything the clients saw. */
export interface ProductionLoadResult {
  readonly sent: number;
  readonly completed: number;
  readonly aborted: number;
  readonly errors: number;
  /** Errors that never got an answer from the router's data plane (no response carrying `X-Request-Id`). */
  readonly errorsBeforeRouter: number;
  readonly errorsByKind: Record<string, number>;
  /** Up to 20 distinct failure descriptions. */
  readonly failures: string[];
  /** Requests by how they carried the session id. */
  readonly byIdMode: Record<IdMode, number>;
  readonly conversations: { readonly resident: number; readonly poisson: number };
  readonly events: number;
  readonly peakOpen: number;
  /** Request handed to http.request → first event (ms), streams that had one. */
  readonly ttftMs: Summary;
  /** Gaps between consecutive reads that carried events (ms), a uniform sample of at most 200,000. */
  readonly gapMs: Summary;
  /** This generator's own event-loop delay over the run (ms): high values mean the client was the bottleneck. */
  readonly generatorLagMs: { readonly p99: number; readonly max: number };
  readonly elapsedMs: number;
}

type IdMode = 'header' | 'body' | 'none';
/** An error knows whether the router's data plane answered (a response with `X-Request-Id`). */
type Outcome = 'completed' | 'aborted' | { readonly error: string; readonly detail: string; readonly routerAnswered: boolean };

interface Message {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

const GAP_SAMPLES = 200_000;

/** Runs the load; resolves once every stream it started has ended. */
export async function runProductionLoad(
  spec: ProductionLoadSpec,
  onProgress: (p: ProductionProgress) => void = () => undefined,
): Promise<ProductionLoadResult> {
  return new ProductionLoad(spec, onProgress).run();
}

class ProductionLoad {
  private readonly random: () => number;
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 8_192 });
  private readonly url: URL;
  private readonly t0 = performance.now();
  private phase: ProductionProgress['phase'] = 'ramp';
  private stopAt = Infinity;
  private sent = 0;
  /** `<id>\t<outcome>` per request, kept only with `outcomesFile`. */
  private readonly outcomes: string[] = [];
  private completed = 0;
  private aborted = 0;
  private errors = 0;
  private errorsBeforeRouter = 0;
  private events = 0;
  private open = 0;
  private peakOpen = 0;
  private readonly errorsByKind: Record<string, number> = {};
  private readonly failures = new Set<string>();
  private readonly byIdMode: Record<IdMode, number> = { header: 0, body: 0, none: 0 };
  private readonly conversations = { resident: 0, poisson: 0 };
  private readonly ttft: number[] = [];
  private readonly gaps: number[] = [];
  private gapsSeen = 0;

  constructor(
    private readonly spec: ProductionLoadSpec,
    private readonly onProgress: (p: ProductionProgress) => void,
  ) {
    this.random = seededRandom(spec.seed);
    this.url = new URL('/v1/chat/completions', spec.url);
  }

  async run(): Promise<ProductionLoadResult> {
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const ticker = setInterval(() => this.report(), 1_000);
    const rampEnd = this.t0 + this.spec.rampMs;
    this.stopAt = rampEnd + this.spec.durationMs;
    const phases = [setTimeout(() => this.enter('steady'), this.spec.rampMs), setTimeout(() => this.enter('drain'), this.spec.rampMs + this.spec.durationMs)];
    const all: Array<Promise<void>> = [];
    for (let i = 0; i < this.spec.streams; i++) all.push(this.resident((i * this.spec.rampMs) / this.spec.streams));
    all.push(this.poisson(all));
    // `all` grows while the Poisson arrivals run; wait until it stops growing.
    for (let seen = 0; seen < all.length;) {
      const batch = all.slice(seen);
      seen = all.length;
      await Promise.all(batch);
    }
    for (const t of phases) clearTimeout(t);
    clearInterval(ticker);
    this.enter('done');
    lag.disable();
    this.agent.destroy();
    if (this.spec.outcomesFile !== undefined) writeFileSync(this.spec.outcomesFile, this.outcomes.map((l) => `${l}\n`).join(''));
    return {
      sent: this.sent,
      completed: this.completed,
      aborted: this.aborted,
      errors: this.errors,
      errorsBeforeRouter: this.errorsBeforeRouter,
      errorsByKind: this.errorsByKind,
      failures: [...this.failures],
      byIdMode: this.byIdMode,
      conversations: this.conversations,
      events: this.events,
      peakOpen: this.peakOpen,
      ttftMs: summarize(this.ttft),
      gapMs: summarize(this.gaps),
      // monitorEventLoopDelay records the whole timer period: the delay is what exceeds the resolution.
      generatorLagMs: { p99: Math.max(0, lag.percentile(99) / 1e6 - 10), max: Math.max(0, lag.max / 1e6 - 10) },
      elapsedMs: performance.now() - this.t0,
    };
  }

  private enter(phase: ProductionProgress['phase']): void {
    this.phase = phase;
    this.report();
  }

  private report(): void {
    const { phase, sent, completed, aborted, errors, events, open } = this;
    this.onProgress({ phase, atMs: performance.now() - this.t0, sent, completed, aborted, errors, events, open });
  }

  private async resident(startDelayMs: number): Promise<void> {
    await sleep(startDelayMs);
    while (performance.now() < this.stopAt) {
      this.conversations.resident++;
      await this.conversation();
    }
  }

  private async poisson(all: Array<Promise<void>>): Promise<void> {
    if (this.spec.newSessionsPerS <= 0) return;
    for (;;) {
      await sleep(exponential(this.random, 1000 / this.spec.newSessionsPerS));
      if (performance.now() >= this.stopAt) return;
      this.conversations.poisson++;
      all.push(this.conversation());
    }
  }

  private between([lo, hi]: readonly [number, number]): number {
    return lo + Math.floor(this.random() * (hi - lo + 1));
  }

  private async conversation(): Promise<void> {
    const draw = this.random();
    const share = this.spec.sessionIdShare;
    const mode: IdMode = draw < share / 2 ? 'header' : draw < share ? 'body' : 'none';
    const id = hexId(this.random);
    const turns = this.between(this.spec.turns);
    const messages: Message[] = [{ role: 'system', content: words(this.random, this.between(this.spec.systemWords)) }];
    for (let turn = 0; turn < turns && performance.now() < this.stopAt; turn++) {
      messages.push({ role: 'user', content: words(this.random, this.between(this.spec.userWords)) });
      const drawn = this.between(this.spec.outputTokens);
      const abortAfter = this.random() < this.spec.abortShare ? 1 + Math.floor(this.random() * Math.floor(drawn / 2)) : 0;
      // A stream to be dropped asks for 64 more tokens than it will read: the replica is still
      // generating when the client leaves (≥ 1 s of slack even for a client running late), so the
      // router and the replica see the abort too, never a stream that had already finished.
      const tokens = abortAfter > 0 ? Math.max(drawn, abortAfter + 64) : drawn;
      const body = JSON.stringify({ model: 'sim-model', stream: true, max_tokens: tokens, messages, ...(mode === 'body' ? { session_id: id } : {}) });
      const outcome = await this.stream(body, mode === 'header' ? id : null, abortAfter);
      this.byIdMode[mode]++;
      this.count(outcome);
      if (outcome !== 'completed') return; // a broken conversation is not continued
      // The simulator answers with its fixed word list; any text of that length keeps the prefix growing alike.
      messages.push({ role: 'assistant', content: words(seededRandom(tokens), tokens) });
    }
  }

  private count(outcome: Outcome): void {
    if (outcome === 'completed') this.completed++;
    else if (outcome === 'aborted') this.aborted++;
    else {
      this.errors++;
      if (!outcome.routerAnswered) this.errorsBeforeRouter++;
      this.errorsByKind[outcome.error] = (this.errorsByKind[outcome.error] ?? 0) + 1;
      if (this.failures.size < 20) this.failures.add(`${outcome.error}: ${outcome.detail}`);
    }
  }

  /** One streamed turn; `abortAfter` > 0 drops the connection once that many events arrived. */
  private stream(body: string, sessionHeader: string | null, abortAfter: number): Promise<Outcome> {
    return new Promise((resolve) => {
      const startAt = performance.now();
      const headers: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
      if (sessionHeader !== null) headers['x-session-id'] = sessionHeader;
      const requestId = `w${this.spec.seed}-${this.sent + 1}`;
      if (this.spec.outcomesFile !== undefined) headers['x-request-id'] = requestId;
      let settled = false;
      let got = 0;
      let lastAt = NaN;
      let tail = '';
      const finish = (o: Outcome): void => {
        if (settled) return;
        settled = true;
        this.open--;
        if (this.spec.outcomesFile !== undefined) this.outcomes.push(`${requestId}\t${typeof o === 'string' ? o : o.error}`);
        resolve(o);
      };
      let routerAnswered = false;
      const req = http.request(this.url, { method: 'POST', agent: this.agent, headers }, (res) => {
        const status = res.statusCode ?? 0;
        routerAnswered = res.headers['x-request-id'] !== undefined;
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          // Count `\n\n` frame ends, including one split between two reads.
          let n = tail.endsWith('\n') && text.startsWith('\n') ? 1 : 0;
          for (let i = text.indexOf('\n\n'); i >= 0; i = text.indexOf('\n\n', i + 2)) n++;
          tail = (tail + text).slice(-32);
          if (n === 0) return;
          const at = performance.now();
          if (got === 0) this.ttft.push(at - startAt);
          else this.sampleGap(at - lastAt);
          lastAt = at;
          got += n;
          this.events += n;
          if (abortAfter > 0 && got >= abortAfter && status === 200 && !tail.includes('[DONE]')) {
            req.destroy();
            finish('aborted');
          }
        });
        res.on('close', () => {
          if (status !== 200)
            finish({ error: `status ${status}${routerAnswered ? '' : ' (not from the data plane)'}`, detail: tail.trim().slice(-120), routerAnswered });
          else if (!res.complete) finish({ error: 'incomplete', detail: `${got} events, then the response broke`, routerAnswered });
          else if (!tail.endsWith('data: [DONE]\n\n')) finish({ error: 'no [DONE]', detail: `${got} events, ends ${JSON.stringify(tail)}`, routerAnswered });
          else finish('completed');
        });
      });
      req.setTimeout(this.spec.idleTimeoutMs, () => {
        finish({ error: 'idle timeout', detail: `no data for ${this.spec.idleTimeoutMs} ms after ${got} events`, routerAnswered });
        req.destroy();
      });
      req.on('error', (e: NodeJS.ErrnoException) =>
        finish({
          error: `connection ${e.code ?? 'error'}${routerAnswered ? '' : ' before any answer'}`,
          detail: `${e.message} after ${got} events (${req.reusedSocket ? 'reused' : 'new'} socket)`,
          routerAnswered,
        }),
      );
      this.sent++;
      this.open++;
      if (this.open > this.peakOpen) this.peakOpen = this.open;
      req.end(body);
    });
  }

  /** Reservoir sampling (algorithm R) keeps a uniform sample of every gap seen. */
  private sampleGap(ms: number): void {
    this.gapsSeen++;
    if (this.gaps.length < GAP_SAMPLES) this.gaps.push(ms);
    else {
      const j = Math.floor(this.random() * this.gapsSeen);
      if (j < GAP_SAMPLES) this.gaps[j] = ms;
    }
  }
}

/** `n` pseudo-words (the simulator's tokens are whitespace-separated words). */
function words(random: () => number, n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(`w${Math.floor(random() * 50_000).toString(36)}`);
  return out.join(' ');
}
