import { Module } from '@nestjs/common';
import { MetricsRegistryModule } from '../../common/metrics/metrics-registry.js';
import { HealthModule } from '../health/health.module.js';
import { ProxyModule } from '../proxy/proxy.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { MetricsController } from './metrics.controller.js';
import { MetricsService } from './metrics.service.js';
import { WorkersModule } from '../workers/workers.module.js';
import { RequestLogService } from './request-log.service.js';

@Module({
  imports: [RoutingModule, HealthModule, ProxyModule, MetricsRegistryModule, WorkersModule],
  controllers: [MetricsController],
  providers: [MetricsService, RequestLogService],
})
export class MetricsModule {}
