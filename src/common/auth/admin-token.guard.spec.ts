import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ForbiddenException, type ExecutionContext } from '@nestjs/common';
import { AdminTokenGuard } from './admin-token.guard.js';
import type { AuditState } from '../audit/audit.js';

function contextFor(raw: AuditState): ExecutionContext {
  const req = { raw, url: '/fleet/new-route', routeOptions: { url: '/fleet/new-route' } };
  return { switchToHttp: () => ({ getRequest: () => req }) } as unknown as ExecutionContext;
}

describe('AdminTokenGuard', () => {
  it('lets through a request the admin gate admitted', () => {
    const raw: AuditState = { adminId: 'abc123' };
    assert.equal(new AdminTokenGuard().canActivate(contextFor(raw)), true);
    assert.equal(raw.adminRoute, true);
  });

  it('refuses, naming the route, an admin route the gate never judged (fail closed)', () => {
    const raw: AuditState = {};
    assert.throws(
      () => new AdminTokenGuard().canActivate(contextFor(raw)),
      (e: unknown) => e instanceof ForbiddenException && /\/fleet\/new-route is an admin route the admin gate does not cover/.test(e.message),
    );
    assert.equal(raw.adminRoute, true);
  });
});
