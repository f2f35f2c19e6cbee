import type { Exchange } from './exchange.js';
import { failExchange } from './exchange-end.js';

/**
 * Checks of a `/v1/` request line before anything is read or forwarded: paths whose dot segments
 * (raw, or hidden behind percent escapes or backslashes) could leave `/v1/` once a replica or a
 * proxy in front of it normalises them, and methods that have no business on an inference API.
 */

/** Methods refused with 405: TRACE/TRACK echo requests back (credentials included), CONNECT tunnels. */
const REFUSED_METHODS = new Set(['TRACE', 'TRACK', 'CONNECT']);
/** What the data plane serves; the `Allow` header of a 405. */
export const ALLOWED_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';

export function refusedMethod(method: string | undefined): boolean {
  return method !== undefined && REFUSED_METHODS.has(method);
}

/**
 * Whether the path of `url` has a `.` or `..` segment, counting `%2e` as a dot and `%2f`, `%5c`
 * and `\` as separators (as servers that decode before routing see it). Cheap for the common case:
 * a path with neither `.` nor `%` is returned at once.
 */
export function hasDotSegment(url: string): boolean {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (!path.includes('.') && !path.includes('%')) return false;
  const plain = path.replace(/%2e/gi, '.').replace(/%2f|%5c|\\/gi, '/');
  return plain.split('/').some((s) => s === '.' || s === '..');
}

/** TRACE, TRACK, CONNECT: 405 with `Allow`; a path with dot segments: 400. Neither is forwarded. */
export function refuseRequestLine(ex: Exchange, url: string): void {
  if (refusedMethod(ex.req.method)) {
    ex.res.setHeader('allow', ALLOWED_METHODS);
    return failExchange(ex, 'method_not_allowed', 'rejected', `${ex.req.method} is not allowed on ${url.split('?')[0].slice(0, 200)}`);
  }
  failExchange(ex, 'invalid_path', 'rejected', 'the request path has a "." or ".." segment (raw or percent-encoded); it is not forwarded');
}
