import { HttpCode, Inject, Post, Req } from '@nestjs/common';
import { ApiOkResponse, ApiUnprocessableEntityResponse } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { AdminController } from './admin-api.decorator.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { audited } from '../../common/audit/audit.js';
import { DomainError } from '../../common/errors/domain-error.js';
import { ReloadService } from '../reload/reload.service.js';
import { reloadView, ReloadView } from './dto/reload.view.js';

@AdminController('admin')
export class ReloadController {
  constructor(
    private readonly reloads: ReloadService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  @Post('reload')
  @HttpCode(200)
  @ApiOkResponse({ type: ReloadView, description: 'the config file and ROUTER_* environment were read again and applied (what changed, what needs a restart)' })
  @ApiUnprocessableEntityResponse({ description: 'the new config is invalid (invalid_config, `problems` name each path); nothing changed' })
  async reload(@Req() req: FastifyRequest): Promise<ReloadView> {
    return audited(this.log, req, 'reload config', async () => {
      const o = await this.reloads.reload('admin');
      if (o.result === 'invalid') {
        throw new DomainError('invalid_config', `the new config is invalid, nothing changed: ${o.problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`, {
          problems: o.problems.map((p) => ({ path: p.path, message: p.message })),
        });
      }
      return reloadView(o);
    });
  }
}
