import { Body, Delete, Get, HttpCode, Inject, Param, ParseBoolPipe, Patch, Post, Query, Req, Res } from '@nestjs/common';
import { ApiAcceptedResponse, ApiBadGatewayResponse, ApiConflictResponse, ApiNotFoundResponse, ApiOkResponse, ApiQuery } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AdminController } from './admin-api.decorator.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { FleetService } from '../fleet/fleet.service.js';
import { RegistryService } from '../registry/registry.service.js';
import { audited } from '../../common/audit/audit.js';
import { DomainError } from '../../common/errors/domain-error.js';
import { DrainStateView, LaunchedView, StoppedView } from './dto/fleet.view.js';
import { LaunchReplicasDto, PatchReplicaDto } from './dto/launch-replicas.dto.js';
import { capacityView, replicaView, ReplicaListView, ReplicaView } from './dto/replica.view.js';

const LAUNCHED_MESSAGE = 'launched; it becomes routable once its model is loaded';

@AdminController('replicas')
export class ReplicasController {
  constructor(
    private readonly registry: RegistryService,
    private readonly fleet: FleetService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  @Get()
  @ApiOkResponse({ type: ReplicaListView, description: 'the replica table and launch capacity (pypto-compatible)' })
  list(): ReplicaListView {
    return { replicas: this.registry.list.map(replicaView), capacity: capacityView(this.fleet.capacity()) };
  }

  @Post()
  @HttpCode(202)
  @ApiAcceptedResponse({ type: LaunchedView, description: 'launched (a list when count > 1); routable once healthy' })
  @ApiConflictResponse({ description: 'past the ceiling or no free slot; carries `capacity`' })
  @ApiNotFoundResponse({ description: 'unknown host, or no host serves the model' })
  @ApiBadGatewayResponse({ description: 'the launch command itself failed' })
  async launch(@Body() body: LaunchReplicasDto = {}, @Req() req: FastifyRequest): Promise<LaunchedView | LaunchedView[]> {
    const what = `launch count=${body.count ?? 1}${body.host ? ` host=${body.host}` : ''}${body.model ? ` model=${JSON.stringify(body.model)}` : ''}`;
    return audited(this.log, req, what, async () => {
      const launched = await this.fleet.launch(body.count ?? 1, body.host, body.model);
      const views = launched.map((r) => ({ name: r.name, url: r.url, ready: false, message: LAUNCHED_MESSAGE }));
      return (body.count ?? 1) > 1 ? views : views[0];
    });
  }

  @Delete(':name')
  @ApiQuery({ name: 'wait', required: false, type: Boolean, description: 'false: answer 202 with the drain state at once' })
  @ApiOkResponse({ type: StoppedView, description: 'drained and stopped (wait=true, the default)' })
  @ApiAcceptedResponse({ type: DrainStateView, description: 'drain started or joined (wait=false)' })
  @ApiNotFoundResponse({ description: 'unknown replica' })
  @ApiConflictResponse({
    description: 'a static replica (not launched by this router), or an adopted one the router cannot stop (no proven pid, no stop_command)',
  })
  @ApiBadGatewayResponse({
    description: 'stop_incomplete: the replica still answers --stop-grace after its stop (and after signals, when its pid is proven); its slot stays reserved',
  })
  async remove(
    @Param('name') name: string,
    @Query('wait', new ParseBoolPipe({ optional: true })) wait: boolean | undefined,
    @Req() req: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<StoppedView | DrainStateView> {
    return audited(this.log, req, `remove ${name}${wait === false ? ' wait=false' : ''}`, async () => {
      const { rec, done } = this.fleet.remove(name);
      if (wait === false) {
        void reply.status(202);
        return this.fleet.drainStatus(rec);
      }
      await done;
      // DELETE refuses a replica it has no way to stop (not_stoppable), so one left running here
      // still answered after its stop.
      if (rec.leftRunning !== undefined) throw new DomainError('stop_incomplete', rec.leftRunning, { capacity: capacityView(this.fleet.capacity()) });
      return { name, stopped: true, capacity: capacityView(this.fleet.capacity()) };
    });
  }

  @Patch(':name')
  @ApiOkResponse({ type: ReplicaView, description: 'the replica after the change' })
  @ApiNotFoundResponse({ description: 'unknown replica' })
  @ApiConflictResponse({ description: 'un-draining a replica that is being removed' })
  async patch(@Param('name') name: string, @Body() body: PatchReplicaDto, @Req() req: FastifyRequest): Promise<ReplicaView> {
    return audited(this.log, req, `patch ${name} draining=${body.draining}`, () => replicaView(this.fleet.setDraining(name, body.draining)));
  }
}
