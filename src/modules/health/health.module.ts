import { Module } from '@nestjs/common';
import { RoutingModule } from '../routing/routing.module.js';
import { HealthController } from './health.controller.js';
import { HealthJobs } from './health.jobs.js';
import { HealthService } from './health.service.js';
import { ModelDiscovery } from './model-discovery.service.js';

@Module({
  imports: [RoutingModule],
  controllers: [HealthController],
  providers: [HealthService, HealthJobs, ModelDiscovery],
  exports: [HealthService, ModelDiscovery],
})
export class HealthModule {}
