import { ForbiddenException, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { AuditState } from '../audit/audit.js';

/**
 * Admin routes need `Authorization: Bearer <token>` (contract §1). The token is checked in one
 * place, the admin gate (admin-gate.ts), ahead of Fastify, which notes the caller on the request;
 * this guard only makes sure the gate judged the request. An admin route the gate's path matcher
 * does not cover is refused (fail closed) instead of being served unauthenticated.
 */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    const state = req.raw as AuditState;
    state.adminRoute = true; // a refusal below is audited too (the exception filter writes it)
    if (state.adminId !== undefined) return true;
    throw new ForbiddenException(`${req.routeOptions.url ?? req.url} is an admin route the admin gate does not cover; refused`);
  }
}
