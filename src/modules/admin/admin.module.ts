import { Module } from '@nestjs/common';
import { FleetModule } from '../fleet/fleet.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { FleetController } from './fleet.controller.js';
import { ReplicasController } from './replicas.controller.js';
import { SessionsController } from './sessions.controller.js';

@Module({
  imports: [RoutingModule, FleetModule],
  controllers: [ReplicasController, FleetController, SessionsController],
})
export class AdminModule {}
