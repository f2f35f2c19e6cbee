import { Module } from '@nestjs/common';
import { FleetModule } from '../fleet/fleet.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { ReplicasController } from './replicas.controller.js';

@Module({
  imports: [RoutingModule, FleetModule],
  controllers: [ReplicasController],
})
export class AdminModule {}
