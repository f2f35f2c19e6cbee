import { Module } from '@nestjs/common';
import { MetricsRegistryModule } from '../../common/metrics/metrics-registry.js';
import { FleetModule } from '../fleet/fleet.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { AutoscaleMetrics } from './autoscale.metrics.js';
import { AutoscaleView } from './autoscale-view.service.js';
import { AutoscalerService } from './autoscaler.service.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { ClusterModule } from '../cluster/cluster.module.js';

/** The autoscaler (contract §6.1, docs/design.md §8): decides from the pools' load, acts through the fleet. */
@Module({
  imports: [FleetModule, RoutingModule, MetricsRegistryModule, LifecycleModule, ClusterModule],
  providers: [AutoscaleView, AutoscalerService, AutoscaleMetrics],
  exports: [AutoscalerService],
})
export class AutoscaleModule {}
