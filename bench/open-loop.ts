/**
 * An open-loop load generator: requests leave at scheduled times whether or not earlier ones
 * were answered (a fixed offered load, unlike wrk's closed loop). Latency is measured with
 * `performance.now()` (µs resolution) from the moment the request is handed to `http.request`
 * to the end of the response body; how late the generator itself was (`lag`) is reported apart.
 */
import http from 'node:http';
import { summarize, type Summary } from './stats.js';

/** A finished request. */
export interface Sent {
  status: number;
  body: Buffer;
  /** performance.now() when the request was handed to http.request. */
  startAt: number;
  endAt: number;
}

/** POSTs `body` to `url` through `agent` and buffers the answer; rejects on socket errors. */
export function post(agent: http.Agent, url: URL, body: string, headers: Record<string, string> = {}, timeoutMs = 60_000): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const startAt = performance.now();
    const req = http.request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), startAt, endAt: performance.now() }));
        res.on('error', reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${url.href}: no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** A keep-alive agent for generators (many sockets, never queued by a small cap). */
export function loadAgent(maxSockets = 512): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
}

/** Options of {@link runOpenLoop}. */
export interface OpenLoopSpec {
  url: URL;
  /** Requests per second, evenly spaced. */
  rate: number;
  durationS: number;
  /** Body of request `i`. */
  body(i: number): string;
}

/** What an open-loop run measured (milliseconds). */
export interface OpenLoopResult {
  offeredRate: number;
  sent: number;
  ok: number;
  non2xx: number;
  errors: number;
  /** Completed 2xx per second of wall time (first send to last answer). */
  achievedRate: number;
  latency: Summary;
  /** Every 2xx request's latency, in the order they ended. */
  latencies: number[];
  /** How late sends left compared with the schedule. */
  lag: Summary;
}

/** Sends `rate × durationS` requests on an even schedule and waits for every answer. */
export async function runOpenLoop(spec: OpenLoopSpec): Promise<OpenLoopResult> {
  const agent = loadAgent();
  const total = Math.max(1, Math.round(spec.rate * spec.durationS));
  const interval = 1000 / spec.rate;
  const latencies: number[] = [];
  const lags: number[] = [];
  let ok = 0;
  let non2xx = 0;
  let errors = 0;
  let lastEnd = 0;
  const pending: Array<Promise<void>> = [];
  const t0 = performance.now() + 20;
  const fire = (i: number): void => {
    lags.push(performance.now() - (t0 + i * interval));
    pending.push(
      post(agent, spec.url, spec.body(i)).then(
        (r) => {
          lastEnd = Math.max(lastEnd, r.endAt);
          if (r.status >= 200 && r.status < 300) {
            ok++;
            latencies.push(r.endAt - r.startAt);
          } else non2xx++;
        },
        () => {
          errors++;
        },
      ),
    );
  };
  await new Promise<void>((done) => {
    let next = 0;
    const tick = (): void => {
      const now = performance.now();
      while (next < total && t0 + next * interval <= now) fire(next++);
      if (next >= total) return done();
      setTimeout(tick, Math.max(0, t0 + next * interval - performance.now()));
    };
    setTimeout(tick, 20);
  });
  await Promise.all(pending);
  agent.destroy();
  return {
    offeredRate: spec.rate,
    sent: total,
    ok,
    non2xx,
    errors,
    achievedRate: lastEnd > t0 ? ok / ((lastEnd - t0) / 1000) : 0,
    latency: summarize(latencies),
    latencies,
    lag: summarize(lags),
  };
}

/**
 * Open-loop pacing of a planned run: calls `fire(i)` for every turn at `t0 + turns[i].atMs`, never
 * waiting for an answer; resolves once the last one is fired.
 */
export function fireOnSchedule(turns: readonly { readonly atMs: number }[], t0: number, fire: (i: number) => void): Promise<void> {
  return new Promise<void>((done) => {
    let next = 0;
    const tick = (): void => {
      while (next < turns.length && t0 + (turns[next]?.atMs ?? 0) <= performance.now()) fire(next++);
      if (next >= turns.length) return done();
      setTimeout(tick, Math.max(0, t0 + (turns[next]?.atMs ?? 0) - performance.now()));
    };
    setTimeout(tick, 50);
  });
}
