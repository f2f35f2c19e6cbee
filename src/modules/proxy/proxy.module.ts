import { Module } from '@nestjs/common';
import { HealthModule } from '../health/health.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { DataPlaneService } from './data-plane.service.js';
import { ExchangeObserver } from './exchange.observer.js';
import { SpeedFeed } from './speed-feed.service.js';
import { BodyBudget } from './body-budget.service.js';
import { WarmCopies } from './warm-copy.service.js';
import { WarmMetrics } from './warm.metrics.js';
import { MetricsRegistryModule } from '../../common/metrics/metrics-registry.js';

/**
 * The data plane. It is not a Nest middleware: createApp() hands every `/v1/` request to
 * DataPlaneService.serve() straight from the HTTP server, ahead of Fastify's router and the Nest
 * middleware chain (docs/design.md §3).
 */
@Module({
  imports: [RoutingModule, HealthModule, MetricsRegistryModule],
  providers: [DataPlaneService, ExchangeObserver, SpeedFeed, BodyBudget, WarmCopies, WarmMetrics],
  exports: [DataPlaneService, ExchangeObserver, WarmCopies],
})
export class ProxyModule {}
