import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Exchange } from './exchange.js';

/*
 * The two directions of a forwarded exchange: the headers sent to the replica and back to the
 * client (hop-by-hop ones dropped, the router's own added), and the response body relayed chunk
 * by chunk as it arrives.
 */

/**
 * The request headers sent to the replica: the client's minus hop-by-hop ones, `host` set to the
 * replica (the engine sees its own address), `X-Forwarded-*` appended, the resolved session and
 * request ids, and the length of the buffered body.
 */
export function upstreamHeaders(ex: Exchange, hostHeader: string): OutgoingHttpHeaders {
  const req = ex.req;
  const inHeaders = req.headers;
  const out = copyEndToEnd(inHeaders, {});
  const clientHost = inHeaders.host;
  const encrypted = (req.socket as TLSSocket).encrypted === true;
  const port = clientHost !== undefined ? /:(\d+)$/.exec(clientHost)?.[1] : undefined;
  appendForwarded(out, 'x-forwarded-for', req.socket.remoteAddress ?? '');
  appendForwarded(out, 'x-forwarded-port', port ?? (encrypted ? '443' : '80'));
  appendForwarded(out, 'x-forwarded-proto', encrypted ? 'https' : 'http');
  out['x-forwarded-host'] = inHeaders['x-forwarded-host'] ?? clientHost ?? '';
  out.host = hostHeader;
  out['x-session-id'] = ex.request!.sessionId;
  out['x-request-id'] = ex.id;
  const length = ex.body!.length;
  if (length > 0 || (req.method !== 'GET' && req.method !== 'HEAD')) out['content-length'] = length;
  else delete out['content-length'];
  return out;
}

function appendForwarded(h: OutgoingHttpHeaders, name: string, value: string): void {
  const prior = h[name];
  h[name] = prior === undefined ? value : `${String(prior)},${value}`;
}

/** Response headers the router sets itself (Exchange.pushRouterHeaders): a replica's own, an engine's `x-request-id` say, are not passed on. */
const ROUTER_SET = new Set(['x-request-id', 'x-router-affinity', 'x-session-id', 'x-router-replica']);

/** A replica's response head as the client gets it. */
export interface ResponseHead {
  /** Flat `[name, value, ...]`, as `writeHead` takes it: the replica's end-to-end headers (names lowercased), then the router's. */
  readonly headers: string[];
  /** `Content-Type: text/event-stream`: relayed chunk by chunk with the stream idle timeout. */
  readonly stream: boolean;
}

/** The replica's response headers (raw, as undici read them) minus hop-by-hop ones, plus the router's own (contract §3). */
export function responseHead(raw: Buffer[], ex: Exchange): ResponseHead {
  const names: string[] = [];
  let connection: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toString('latin1').toLowerCase();
    names.push(name);
    if (name === 'connection') (connection ??= []).push(raw[i + 1].toString('latin1'));
  }
  const named = connectionNamed(connection);
  const headers: string[] = [];
  let stream = false;
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    if (HOP_BY_HOP.has(name) || ROUTER_SET.has(name) || named?.has(name) === true) continue;
    const value = raw[2 * i + 1].toString('latin1');
    if (name === 'content-type') stream = value.startsWith('text/event-stream');
    headers.push(name, value);
  }
  ex.pushRouterHeaders(headers);
  return { headers, stream };
}

/**
 * Relay one chunk of a replica's body to the client as it arrives, never buffered (contract §3),
 * keeping the exchange's byte and timing marks and refreshing a stream's idle timer. False when
 * the client's buffer is full: the caller pauses the replica's socket, and `paused.resume()` runs
 * once the client drains. What arrives after the client went is dropped.
 */
export function relayChunk(ex: Exchange, c: Buffer, chunkGap: (seconds: number) => void, paused: { resume(): void }): boolean {
  const res = ex.res;
  if (res.writableEnded || res.destroyed) return true;
  if (ex.at.clientFirstByte === 0) ex.at.clientFirstByte = performance.now();
  ex.bytesOut += c.length;
  if (ex.stream) {
    const now = performance.now();
    if (ex.at.lastChunk > 0) chunkGap((now - ex.at.lastChunk) / 1000);
    else ex.at.firstChunk = now;
    ex.at.lastChunk = now;
    ex.timer?.refresh();
    ex.tail = c.length >= 2 ? (c[c.length - 2] << 8) | c[c.length - 1] : ((ex.tail & 0xff) << 8) | c[0];
  }
  if (res.write(c)) return true;
  res.once('drain', () => paused.resume());
  return false;
}

/** The replica's body ended: so does the client's response. */
export function relayEnd(ex: Exchange): void {
  if (!ex.res.writableEnded && !ex.res.destroyed) ex.res.end();
}

/** Headers that describe one hop (RFC 9110 §7.6.1): never forwarded, in either direction. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
  'expect',
]);

/**
 * The header names a `Connection` value lists beyond the fixed set (RFC 9110 §7.6.1: they are
 * hop-by-hop too), lowercased; undefined when it lists none, the common case (`keep-alive`, `close`).
 */
function connectionNamed(value: string | string[] | undefined): Set<string> | undefined {
  if (value === undefined || value === 'keep-alive' || value === 'close' || value === 'Keep-Alive') return undefined;
  let named: Set<string> | undefined;
  for (const v of Array.isArray(value) ? value : [value]) {
    for (const token of v.split(',')) {
      const name = token.trim().toLowerCase();
      if (name === '' || HOP_BY_HOP.has(name) || name === 'close') continue;
      (named ??= new Set()).add(name);
    }
  }
  return named;
}

/**
 * `headers` as the flat `[name, value, ...]` list `http.request` takes as it is (the layout of
 * `rawHeaders`): Node then writes them without a `setHeader` per name, which stores and validates
 * each one a second time (bench/RESULTS.md: the data path's allocations). A list value becomes one
 * entry per element.
 */
export function flatHeaders(headers: OutgoingHttpHeaders): string[] {
  const out: string[] = [];
  for (const k in headers) {
    const v = headers[k];
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) out.push(k, x);
    else out.push(k, typeof v === 'string' ? v : String(v));
  }
  return out;
}

/** Copy `from` into `to` without the hop-by-hop headers, those named in its `Connection` included. */
export function copyEndToEnd(from: IncomingHttpHeaders, to: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const named = connectionNamed(from.connection);
  for (const k in from) if (!HOP_BY_HOP.has(k) && (named === undefined || !named.has(k))) to[k] = from[k];
  return to;
}
