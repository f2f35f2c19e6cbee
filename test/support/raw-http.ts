import { connect } from 'node:net';

/** One HTTP/1.1 response read off a raw connection. */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Everything a raw connection received, parsed into the responses it held. */
export interface RawExchange {
  responses: RawResponse[];
  /** The server closed the connection (rather than `waitMs` running out). */
  closed: boolean;
  text: string;
}

/** Parses consecutive responses framed by Content-Length (the router's own answers always are). */
export function parseResponses(text: string): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (!rest.startsWith('HTTP/1.1 ') || end < 0) return out;
    const lines = rest.slice(0, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
    const length = Number(headers['content-length'] ?? NaN);
    const body = Number.isFinite(length) ? rest.slice(end + 4, end + 4 + length) : rest.slice(end + 4);
    out.push({ status: Number(lines[0].slice(9, 12)), headers, body });
    if (!Number.isFinite(length)) return out;
    rest = rest.slice(end + 4 + length);
  }
}

/**
 * Writes `bytes` on a fresh connection and collects what comes back until the server closes it,
 * until `expect` responses are complete, or `waitMs` passes. `abortAfterMs` destroys the connection
 * from the client side after that long (a client that leaves).
 */
export function rawExchange(url: string, bytes: Buffer | string, opts: { waitMs?: number; expect?: number; abortAfterMs?: number } = {}): Promise<RawExchange> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const s = connect(Number(port), hostname, () => s.write(bytes));
    let text = '';
    let done = false;
    const finish = (closed: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (abort !== undefined) clearTimeout(abort);
      s.destroy();
      resolve({ responses: parseResponses(text), closed, text });
    };
    const timer = setTimeout(() => finish(false), opts.waitMs ?? 10_000);
    const abort = opts.abortAfterMs !== undefined ? setTimeout(() => finish(false), opts.abortAfterMs) : undefined;
    s.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (opts.expect !== undefined) {
        const rs = parseResponses(text);
        if (rs.length >= opts.expect && rs.every((r) => Buffer.byteLength(r.body, 'latin1') === Number(r.headers['content-length'] ?? -1))) finish(false);
      }
    });
    s.on('error', () => finish(true));
    s.on('close', () => finish(true));
  });
}
