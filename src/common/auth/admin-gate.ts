import type { IncomingMessage, ServerResponse } from 'node:http';
import { auditRefusal, type AuditState } from '../audit/audit.js';
import { writeProblem } from '../errors/problem.js';
import type { AppLogger } from '../logging/logger.js';
import type { AdminTokenCheck } from './admin-token.js';

/** The admin API's route prefixes (contract §8, and `/admin/reload`); `/docs`, `/health`, `/metrics` stay open. */
const ADMIN_PATH = /^\/+(replicas|fleet|sessions|admin)(?=[/?#;]|$)/;
/** Above Fastify's admin body limit: not worth draining to keep the connection. */
const DRAIN_LIMIT = 1024 * 1024;

/**
 * Whether `url` addresses the admin API, judged the way the router would route it: percent
 * escapes decoded where they are valid (`/%72eplicas` is `/replicas`), case and repeated slashes
 * ignored. Malformed escapes elsewhere in the URL do not hide the prefix.
 */
export function isAdminPath(url: string): boolean {
  const path = url.replace(/%([0-9a-fA-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))).toLowerCase();
  return ADMIN_PATH.test(path);
}

/**
 * Authentication ahead of Fastify (contract §1): called from the HTTP server's request listener, before
 * the URL is routed, parameters are checked or the body is read. An admin request without a valid
 * token is answered here (401, or 403 when no token is configured) whatever its body, content type
 * or path, and a refused mutating call writes its audit line. Returns true when the request may go
 * on to Fastify; the caller's id is then noted on the request for the audit lines.
 */
export function admitAdminRequest(req: IncomingMessage, res: ServerResponse, auth: AdminTokenCheck, log: AppLogger): boolean {
  if (!isAdminPath(req.url ?? '/')) return true;
  const state = req as IncomingMessage & AuditState;
  state.adminRoute = true;
  const a = auth.check(req.headers.authorization);
  if (a.ok) {
    state.adminId = a.who;
    return true;
  }
  auditRefusal(log, req, a.status, a.message);
  const headers: Record<string, string> = a.status === 401 ? { 'www-authenticate': 'Bearer' } : {};
  // The body is not read: a small one is drained by Node to keep the connection, a large or
  // endless one closes it.
  const declared = Number(req.headers['content-length'] ?? 0);
  if (req.headers['transfer-encoding'] !== undefined || !(declared <= DRAIN_LIMIT)) headers['connection'] = 'close';
  writeProblem(res, a.status, a.message, a.status === 401 ? 'unauthorized' : 'admin_disabled', headers);
  return false;
}
