import { Module } from '@nestjs/common';
import { MetricsRegistryModule } from '../../common/metrics/metrics-registry.js';
import { RoutingModule } from '../routing/routing.module.js';
import { StateMetrics } from './state.metrics.js';
import { StateService } from './state.service.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { ClusterModule } from '../cluster/cluster.module.js';

/**
 * What the router keeps across restarts (contract §6, docs/design.md §9): the `--state-file` with
 * its journal of pin changes, and the fleet record shared through Redis. Its one interface is
 * StateService; the fleet is its only client.
 */
@Module({
  imports: [RoutingModule, MetricsRegistryModule, LifecycleModule, ClusterModule],
  providers: [StateService, StateMetrics],
  exports: [StateService],
})
export class StateModule {}
