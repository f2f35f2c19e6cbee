import { Module } from '@nestjs/common';
import { MetricsRegistryModule } from '../../common/metrics/metrics-registry.js';
import { AutoscaleModule } from '../autoscale/autoscale.module.js';
import { FleetModule } from '../fleet/fleet.module.js';
import { HealthModule } from '../health/health.module.js';
import { WorkersModule } from '../workers/workers.module.js';
import { ReloadMetrics } from './reload.metrics.js';
import { ReloadService } from './reload.service.js';

/** Config reload without restart (SIGHUP, POST /admin/reload; docs/reload.md). */
@Module({
  imports: [FleetModule, HealthModule, AutoscaleModule, WorkersModule, MetricsRegistryModule],
  providers: [ReloadService, ReloadMetrics],
  exports: [ReloadService],
})
export class ReloadModule {}
