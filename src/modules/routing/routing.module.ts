import { Module } from '@nestjs/common';
import { AffinityModule } from '../affinity/affinity.module.js';
import { RegistryModule } from '../registry/registry.module.js';
import { AdmissionService } from './admission.service.js';
import { RoutingService } from './routing.service.js';
import { RoutingJobs } from './routing.jobs.js';
import { RoutingMetrics } from './routing.metrics.js';
import { MetricsRegistryModule } from '../../common/metrics/metrics-registry.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';

@Module({
  imports: [RegistryModule, AffinityModule, MetricsRegistryModule, LifecycleModule],
  providers: [RoutingService, AdmissionService, RoutingMetrics, RoutingJobs],
  exports: [RoutingService, AdmissionService, RegistryModule, AffinityModule],
})
export class RoutingModule {}
