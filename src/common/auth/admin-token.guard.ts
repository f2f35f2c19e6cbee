import { ForbiddenException, Inject, Injectable, UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { RouterConfig } from '../../config/router-config.js';
import type { AuditState } from '../audit/audit.js';
import { AdminTokenCheck } from './admin-token.js';

/**
 * Admin routes need `Authorization: Bearer <token>` (contract §1). The admin gate (admin-gate.ts)
 * refuses a request without one before anything reads it; this guard checks again on the route,
 * and names the caller for the audit line.
 */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  private readonly auth: AdminTokenCheck;

  constructor(@Inject(RouterConfig) config: RouterConfig) {
    this.auth = new AdminTokenCheck(config.adminToken, config.adminOpen);
  }

  canActivate(ctx: ExecutionContext): boolean {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    const state = req.raw as AuditState;
    state.adminRoute = true; // a refusal below is audited too (the exception filter writes it)
    const a = this.auth.check(req.headers.authorization);
    if (!a.ok) throw a.status === 403 ? new ForbiddenException(a.message) : new UnauthorizedException(a.message);
    state.adminId = a.who;
    return true;
  }
}
