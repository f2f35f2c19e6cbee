import { Module } from '@nestjs/common';
import { RoutingModule } from '../routing/routing.module.js';
import { HealthController } from './health.controller.js';
import { HealthJobs } from './health.jobs.js';
import { HealthService } from './health.service.js';
import { ModelDiscovery } from './model-discovery.service.js';
import { HealthMetrics } from './health.metrics.js';
import { MetricsRegistryModule } from '../../common/metrics/metrics-registry.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';

@Module({
  imports: [RoutingModule, MetricsRegistryModule, LifecycleModule],
  controllers: [HealthController],
  providers: [HealthService, HealthJobs, ModelDiscovery, HealthMetrics],
  exports: [HealthService, ModelDiscovery, HealthJobs],
})
export class HealthModule {}
