import type { FastifyRequest } from 'fastify';
import { HttpException } from '@nestjs/common';
import { DomainError } from '../../common/errors/domain-error.js';
import type { AppLogger } from '../../common/logging/logger.js';

/**
 * Run a mutating admin action and write one audit line for it, whatever the outcome:
 * who (token id hash), what, result.
 */
export async function audited<T>(log: AppLogger, req: FastifyRequest, what: string, action: () => Promise<T> | T): Promise<T> {
  const who = (req as FastifyRequest & { adminId?: string }).adminId ?? 'unknown';
  try {
    const out = await action();
    log.info({ event: 'audit', who, what, result: 'ok' }, `admin ${what}: ok`);
    return out;
  } catch (e) {
    const result = e instanceof DomainError ? e.code : e instanceof HttpException ? `http_${e.getStatus()}` : 'error';
    log.info({ event: 'audit', who, what, result, detail: (e as Error).message }, `admin ${what}: ${result}`);
    throw e;
  }
}
