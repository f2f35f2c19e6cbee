import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { HttpException } from '@nestjs/common';
import { DomainError } from '../errors/domain-error.js';
import type { AppLogger } from '../logging/logger.js';

/** What the admin gate, the token guard and the audit helpers note on a request (on the raw Node request). */
export interface AuditState {
  /** Short hash of the bearer token that passed the guard (`open` with --admin-open). */
  adminId?: string;
  /** Set by the gate and the guard: the request is for an admin route (its refusals are audited too). */
  adminRoute?: boolean;
  /** Set once the audit line of this request was written. */
  audited?: boolean;
}

type AuditedRequest = IncomingMessage & AuditState;

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Run a mutating admin action and write one audit line for it, whatever the outcome:
 * who (token id hash), what, result (contract §8).
 */
export async function audited<T>(log: AppLogger, req: FastifyRequest, what: string, action: () => Promise<T> | T): Promise<T> {
  const r = req.raw as AuditedRequest;
  const who = r.adminId ?? 'unknown';
  r.audited = true;
  try {
    const out = await action();
    writeAudit(log, who, what, 'ok');
    return out;
  } catch (e) {
    const result = e instanceof DomainError ? e.code : e instanceof HttpException ? `http_${e.getStatus()}` : 'error';
    writeAudit(log, who, what, result, (e as Error).message);
    throw e;
  }
}

/**
 * The audit line of a mutating admin call refused before its handler ran (401/403 from the admin
 * gate or the token guard; 400, 413, 415 from parsing or validation): called by the gate, the
 * exception filter and the framework error handler; a no-op for other requests and for calls
 * whose handler already wrote the line.
 */
export function auditRefusal(log: AppLogger, raw: IncomingMessage, status: number, detail: string): void {
  const r = raw as AuditedRequest;
  const method = raw.method ?? '';
  if (r.adminRoute !== true || r.audited === true || !MUTATING.has(method)) return;
  r.audited = true;
  writeAudit(log, r.adminId ?? 'unauthenticated', `${method} ${((raw.url ?? '').split('?')[0] ?? '').slice(0, 256)}`, `http_${status}`, detail);
}

/** The audit line of an action a signal asked for (SIGHUP: reload), in the admin calls' shape; `who` is the signal. */
export function auditSignal(log: AppLogger, signal: string, what: string, result: string, detail?: string): void {
  writeAudit(log, signal, what, result, detail);
}

/** The one shape of an audit line: who, what, result (and why, when it did not succeed). */
function writeAudit(log: AppLogger, who: string, what: string, result: string, detail?: string): void {
  log.info({ event: 'audit', who, what, result, ...(detail !== undefined ? { detail } : {}) }, `admin ${what}: ${result}`);
}
