import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Exchange } from './exchange.js';

/*
 * The two directions of a forwarded exchange: the headers sent to the replica and back to the
 * client (hop-by-hop ones dropped, the router's own added), and the response body relayed as it
 * arrives.
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

/** The replica's response headers minus hop-by-hop ones, plus the router's own (contract §3). */
export function responseHeaders(proxyRes: IncomingMessage, ex: Exchange): OutgoingHttpHeaders {
  return ex.routerHeaders(copyEndToEnd(proxyRes.headers, {}));
}

/**
 * Relay a replica's response body to the client as it arrives, never buffered (contract §3), keeping
 * the exchange's byte and timing marks and refreshing a stream's idle timer on every chunk. The
 * caller wrote the headers; this ends the client response when the replica's ends.
 */
export function relayBody(ex: Exchange, proxyRes: IncomingMessage, chunkGap: (seconds: number) => void): void {
  const res = ex.res;
  // Relay by hand rather than pipe(): one listener does the accounting and the write, and the
  // client's back-pressure pauses the replica's socket.
  proxyRes.on('data', (c: Buffer) => {
    if (res.writableEnded || res.destroyed) return;
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
    if (!res.write(c)) {
      proxyRes.pause();
      res.once('drain', () => proxyRes.resume());
    }
  });
  proxyRes.on('end', () => {
    if (!res.writableEnded && !res.destroyed) res.end();
  });
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
