import { Module } from '@nestjs/common';
import { AffinityModule } from '../affinity/affinity.module.js';
import { RegistryModule } from '../registry/registry.module.js';
import { AdmissionService } from './admission.service.js';
import { RoutingService } from './routing.service.js';
import { RoutingMetrics } from './routing.metrics.js';
import { MetricsRegistryModule } from '../../common/metrics/metrics-registry.js';

@Module({
  imports: [RegistryModule, AffinityModule, MetricsRegistryModule],
  providers: [RoutingService, AdmissionService, RoutingMetrics],
  exports: [RoutingService, AdmissionService, RegistryModule, AffinityModule],
})
export class RoutingModule {}
