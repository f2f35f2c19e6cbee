/**
 * A streaming (SSE) client for the bench: POSTs a body and stamps, with performance.now(), when
 * the headers, the first body byte and every `data:` event arrived.
 */
import http from 'node:http';

/** Timings of one stream (performance.now() milliseconds). */
export interface StreamTiming {
  status: number;
  startAt: number;
  headersAt: number;
  /** First body byte (NaN if none). */
  firstByteAt: number;
  /** Arrival time of every `data:` event, in order. */
  eventsAt: number[];
  /** The last event was `data: [DONE]`. */
  sawDone: boolean;
  /** The response ended normally (not reset/aborted). */
  complete: boolean;
  /** Socket error message, if any. */
  error?: string;
}

/** A stream being read. */
export interface OpenStream {
  /** Resolves once the first `data:` event arrived (or the stream ended without one). */
  readonly firstEvent: Promise<void>;
  /** Resolves when the stream is over (never rejects: errors are recorded in the timing). */
  readonly finished: Promise<StreamTiming>;
}

/** Opens a streaming POST to `url` through `agent`. */
export function openStream(agent: http.Agent, url: URL, body: string, timeoutMs = 120_000): OpenStream {
  const t: StreamTiming = { status: 0, startAt: performance.now(), headersAt: NaN, firstByteAt: NaN, eventsAt: [], sawDone: false, complete: false };
  let markFirst: () => void = () => undefined;
  const firstEvent = new Promise<void>((resolve) => (markFirst = resolve));
  const finished = new Promise<StreamTiming>((resolve) => {
    let settled = false;
    const finish = (error?: string): void => {
      if (settled) return;
      settled = true;
      if (error !== undefined) t.error = error;
      markFirst();
      resolve(t);
    };
    const req = http.request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        t.status = res.statusCode ?? 0;
        t.headersAt = performance.now();
        let buffer = '';
        let last = '';
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          const at = performance.now();
          if (Number.isNaN(t.firstByteAt)) t.firstByteAt = at;
          buffer += text;
          let cut = buffer.indexOf('\n\n');
          while (cut >= 0) {
            const frame = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            if (frame.startsWith('data: ')) {
              t.eventsAt.push(at);
              last = frame.slice(6);
              if (t.eventsAt.length === 1) markFirst();
            }
            cut = buffer.indexOf('\n\n');
          }
        });
        res.on('end', () => {
          t.complete = res.complete;
          t.sawDone = last === '[DONE]';
          finish();
        });
        res.on('error', (e) => finish(e.message));
        res.on('aborted', () => finish('response aborted'));
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no data for ${timeoutMs} ms`)));
    req.on('error', (e) => finish(e.message));
    req.end(body);
  });
  return { firstEvent, finished };
}
