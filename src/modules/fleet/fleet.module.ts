import { Module } from '@nestjs/common';
import { MetricsRegistryModule } from '../../common/metrics/metrics-registry.js';
import { LauncherModule } from '../launcher/launcher.module.js';
import { FleetMetrics } from './fleet.metrics.js';
import { RoutingModule } from '../routing/routing.module.js';
import { AutoscaleView } from './autoscale-view.service.js';
import { AutoscalerService } from './autoscaler.service.js';
import { FleetAdoption } from './fleet-adoption.service.js';
import { FleetBootstrap } from './fleet.bootstrap.js';
import { FleetShutdown } from './fleet-shutdown.service.js';
import { FleetBook } from './fleet-book.service.js';
import { ReplicaLauncher } from './replica-launcher.service.js';
import { ReplicaStopper } from './replica-stopper.service.js';
import { FleetService } from './fleet.service.js';
import { FleetMirror } from './fleet-mirror.service.js';
import { StateService } from './state.service.js';
import { StateMetrics } from './state.metrics.js';

@Module({
  imports: [RoutingModule, LauncherModule, MetricsRegistryModule],
  providers: [
    StateMetrics,
    FleetService,
    FleetBook,
    ReplicaLauncher,
    ReplicaStopper,
    StateService,
    FleetAdoption,
    FleetBootstrap,
    FleetShutdown,
    FleetMirror,
    AutoscaleView,
    AutoscalerService,
    FleetMetrics,
  ],
  exports: [FleetService, AutoscalerService, StateService],
})
export class FleetModule {}
