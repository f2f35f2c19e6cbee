import { Module } from '@nestjs/common';
import { AutoscaleModule } from '../autoscale/autoscale.module.js';
import { FleetModule } from '../fleet/fleet.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { FleetController } from './fleet.controller.js';
import { ReplicasController } from './replicas.controller.js';
import { SessionsController } from './sessions.controller.js';
import { ClusterModule } from '../cluster/cluster.module.js';
import { ReloadModule } from '../reload/reload.module.js';
import { ReloadController } from './reload.controller.js';

@Module({
  imports: [RoutingModule, FleetModule, AutoscaleModule, ClusterModule, ReloadModule],
  controllers: [ReplicasController, FleetController, SessionsController, ReloadController],
})
export class AdminModule {}
