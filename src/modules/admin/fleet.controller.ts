import { Body, Get, Inject, Patch, Req } from '@nestjs/common';
import { ApiConflictResponse, ApiOkResponse } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { AdminController } from './admin-api.decorator.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { audited } from '../../common/audit/audit.js';
import { LeaderService } from '../cluster/leader.service.js';
import { AutoscalerService } from '../autoscale/autoscaler.service.js';
import { FleetService } from '../fleet/fleet.service.js';
import { RouterConfig } from '../../config/router-config.js';
import { RegistryService } from '../registry/registry.service.js';
import { modelCapacity } from './dto/model-capacity.view.js';
import { capacityView } from './dto/replica.view.js';
import { FleetView } from './dto/fleet.view.js';
import { autoscalerView, AutoscalerView, PatchAutoscalerDto } from './dto/autoscaler.view.js';

@AdminController('fleet')
export class FleetController {
  constructor(
    private readonly fleet: FleetService,
    private readonly autoscaler: AutoscalerService,
    private readonly leader: LeaderService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
    private readonly config: RouterConfig,
    private readonly registry: RegistryService,
  ) {}

  @Get()
  @ApiOkResponse({ type: FleetView, description: 'device slots, capacity, orphans found at adoption, recent launch failures, the autoscaler' })
  view(): FleetView {
    const t = this.fleet.slots;
    return {
      slots: t.slots.map((s) => {
        const holder = t.holder(s.name);
        const replica = holder !== undefined && this.fleet.record(s.name) !== undefined ? s.name : null;
        return { name: s.name, host: s.host, devices: [...s.devices], port: s.port, state: holder === undefined ? 'free' : 'reserved', replica };
      }),
      capacity: capacityView(this.fleet.capacity()),
      orphans: this.fleet.orphans.map((o) => ({ ...o, devices: [...o.devices] })),
      failures: this.fleet.failures.map((f) => ({ ...f, devices: [...f.devices] })),
      autoscaler: autoscalerView(this.autoscaler, this.leader.isLeader),
      models: modelCapacity(this.config.hosts, t, this.fleet.capacity(), this.registry.list),
    };
  }

  @Patch('autoscaler')
  @ApiOkResponse({ type: AutoscalerView, description: 'the autoscaler after the change' })
  @ApiConflictResponse({ description: 'no "autoscale" section is configured (autoscale_off), or this router does not lead the fleet (not_leader)' })
  async patchAutoscaler(@Body() body: PatchAutoscalerDto, @Req() req: FastifyRequest): Promise<AutoscalerView> {
    return audited(this.log, req, `autoscaler paused=${body.paused}`, () => {
      this.autoscaler.setPaused(body.paused);
      return autoscalerView(this.autoscaler, this.leader.isLeader);
    });
  }
}
