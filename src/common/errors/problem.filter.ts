import { ArgumentsHost, Catch, HttpException, Inject, type ExceptionFilter } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { auditRefusal } from '../audit/audit.js';
import { APP_LOGGER } from '../logging/logging.module.js';
import type { AppLogger } from '../logging/logger.js';
import { DomainError } from './domain-error.js';
import { problemBody } from './problem.js';

/**
 * The one exception filter of the admin API: RFC 9457 problem+json that also carries
 * pypto-serving-router's `message` member (same text as `detail`). A 500 logs its cause and
 * returns only an error id.
 */
@Catch()
export class ProblemFilter implements ExceptionFilter {
  constructor(@Inject(APP_LOGGER) private readonly log: AppLogger) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    let status = 500;
    let detail: string;
    let extra: Record<string, unknown> = {};
    let code: string | undefined;
    if (exception instanceof DomainError) {
      status = exception.status;
      detail = exception.message;
      extra = exception.extra;
      code = exception.code;
    } else if (exception instanceof HttpException) {
      status = exception.getStatus();
      const r = exception.getResponse();
      const msg = typeof r === 'object' && r !== null ? (r as { message?: unknown }).message : r;
      if (Array.isArray(msg)) {
        detail = msg.map(String).join('; ');
        extra = { errors: msg.map(String) };
      } else {
        detail = typeof msg === 'string' ? msg : exception.message;
      }
      if (typeof r === 'object' && r !== null && 'code' in r) code = String(r.code);
    } else {
      const id = randomUUID();
      this.log.error({ err: exception, errorId: id }, 'unhandled error in admin API');
      detail = `internal error ${id}; the router log has the cause`;
      extra = { error_id: id };
    }
    const body = problemBody(status, detail, code, extra);
    auditRefusal(this.log, host.switchToHttp().getRequest<FastifyRequest>().raw, status, detail);
    if (status === 401) void reply.header('www-authenticate', 'Bearer');
    void reply.status(status).header('content-type', 'application/problem+json').send(JSON.stringify(body));
  }
}
