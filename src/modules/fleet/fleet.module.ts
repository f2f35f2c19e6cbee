import { Module } from '@nestjs/common';
import { MetricsRegistryModule } from '../../common/metrics/metrics-registry.js';
import { LauncherModule } from '../launcher/launcher.module.js';
import { FleetMetrics } from './fleet.metrics.js';
import { RoutingModule } from '../routing/routing.module.js';
import { FleetAdoption } from './fleet-adoption.service.js';
import { FleetBootstrap } from './fleet.bootstrap.js';
import { FleetShutdown } from './fleet-shutdown.service.js';
import { FleetBook } from './fleet-book.service.js';
import { ReplicaLauncher } from './replica-launcher.service.js';
import { ReplicaStopper } from './replica-stopper.service.js';
import { FleetService } from './fleet.service.js';
import { FleetMirror } from './fleet-mirror.service.js';
import { FleetReload } from './fleet-reload.service.js';
import { StateModule } from '../state/state.module.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { ClusterModule } from '../cluster/cluster.module.js';

@Module({
  imports: [RoutingModule, LauncherModule, StateModule, MetricsRegistryModule, LifecycleModule, ClusterModule],
  providers: [FleetService, FleetBook, ReplicaLauncher, ReplicaStopper, FleetAdoption, FleetBootstrap, FleetShutdown, FleetMirror, FleetMetrics, FleetReload],
  exports: [FleetService, FleetReload],
})
export class FleetModule {}
