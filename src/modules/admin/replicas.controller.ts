import { Controller, Get, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiForbiddenResponse, ApiOkResponse, ApiTags, ApiUnauthorizedResponse } from '@nestjs/swagger';
import { AdminTokenGuard } from '../../common/auth/admin-token.guard.js';
import { FleetService } from '../fleet/fleet.service.js';
import { RegistryService } from '../registry/registry.service.js';
import { capacityView, replicaView, ReplicaListView } from './dto/replica.view.js';

@ApiTags('replicas')
@ApiBearerAuth()
@ApiUnauthorizedResponse({ description: 'missing or wrong bearer token' })
@ApiForbiddenResponse({ description: 'no admin token configured (fail closed)' })
@UseGuards(AdminTokenGuard)
@Controller('replicas')
export class ReplicasController {
  constructor(
    private readonly registry: RegistryService,
    private readonly fleet: FleetService,
  ) {}

  @Get()
  @ApiOkResponse({ type: ReplicaListView, description: 'the replica table and launch capacity (pypto-compatible)' })
  list(): ReplicaListView {
    return { replicas: this.registry.list.map(replicaView), capacity: capacityView(this.fleet.capacity()) };
  }
}
