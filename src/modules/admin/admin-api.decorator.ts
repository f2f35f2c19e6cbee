import { applyDecorators, Controller, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiForbiddenResponse, ApiTags, ApiUnauthorizedResponse } from '@nestjs/swagger';
import { AdminTokenGuard } from '../../common/auth/admin-token.guard.js';

/** An admin API controller: bearer token required, 401/403 documented, grouped under `tag`. */
export function AdminController(path: string): ClassDecorator {
  return applyDecorators(
    ApiTags(path),
    ApiBearerAuth(),
    ApiUnauthorizedResponse({ description: 'missing or wrong bearer token' }),
    ApiForbiddenResponse({ description: 'no admin token configured (fail closed)' }),
    UseGuards(AdminTokenGuard),
    Controller(path),
  );
}
