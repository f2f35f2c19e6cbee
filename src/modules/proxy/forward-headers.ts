import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Exchange } from './exchange.js';
import { copyEndToEnd } from './hop-by-hop.js';

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
  out['x-session-id'] = ex.session!.id;
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
  return Object.assign(copyEndToEnd(proxyRes.headers, {}), ex.routerHeaders());
}
