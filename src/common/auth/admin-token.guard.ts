import { ForbiddenException, Inject, Injectable, UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { RouterConfig } from '../../config/router-config.js';
import type { AuditState } from '../audit/audit.js';

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/** Short, non-reversible id of a token for audit lines: who did it, without the secret. */
export function tokenId(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex').slice(0, 12);
}

/**
 * Admin routes need `Authorization: Bearer <token>` (SPEC §1). Both sides are hashed first so the
 * comparison is constant-time whatever the lengths. No token configured ⇒ 403 (fail closed) unless
 * `--admin-open`.
 */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  private readonly expected: Buffer | undefined;

  constructor(@Inject(RouterConfig) private readonly config: RouterConfig) {
    this.expected = config.adminToken !== undefined ? digest(config.adminToken) : undefined;
  }

  canActivate(ctx: ExecutionContext): boolean {
    const req = ctx.switchToHttp().getRequest<FastifyRequest & AuditState>();
    req.adminRoute = true; // a refusal below is audited too (the exception filter writes it)
    if (this.expected === undefined) {
      if (this.config.adminOpen) {
        req.adminId = 'open';
        return true;
      }
      throw new ForbiddenException('the admin API is disabled: no admin token is configured (set ROUTER_ADMIN_TOKEN, or start with --admin-open)');
    }
    const header = req.headers.authorization;
    const m = typeof header === 'string' ? /^bearer\s+(.+)$/i.exec(header.trim()) : null;
    const given = m?.[1] ?? '';
    const ok = timingSafeEqual(digest(given), this.expected) && m !== null;
    if (!ok) throw new UnauthorizedException(m === null ? 'admin token required (Authorization: Bearer <token>)' : 'admin token is wrong');
    req.adminId = tokenId(given);
    return true;
  }
}
