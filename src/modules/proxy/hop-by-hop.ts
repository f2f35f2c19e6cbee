import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

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
  if (value === undefined) return undefined;
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

/** Copy `from` into `to` without the hop-by-hop headers, those named in its `Connection` included. */
export function copyEndToEnd(from: IncomingHttpHeaders, to: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const named = connectionNamed(from.connection);
  for (const k in from) if (!HOP_BY_HOP.has(k) && (named === undefined || !named.has(k))) to[k] = from[k];
  return to;
}
