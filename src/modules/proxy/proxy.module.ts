import { Module } from '@nestjs/common';
import { HealthModule } from '../health/health.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { DataPlaneService } from './data-plane.service.js';
import { ExchangeObserver } from './exchange.observer.js';
import { SpeedFeed } from './speed-feed.service.js';
import { BodyReader } from './body-reader.service.js';
import { RequestIntake } from './request-intake.service.js';
import { WarmCopies } from './warm-copy.service.js';
import { ProxyMetrics } from './proxy.metrics.js';
import { RemoteExchanges } from './remote-exchanges.service.js';
import { MetricsRegistryModule } from '../../common/metrics/metrics-registry.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';

/**
 * The data plane. It is not a Nest middleware: createApp() hands every `/v1/` request to
 * DataPlaneService.serve() straight from the HTTP server, ahead of Fastify's router and the Nest
 * middleware chain (docs/design.md §3).
 */
@Module({
  imports: [RoutingModule, HealthModule, MetricsRegistryModule, LifecycleModule],
  providers: [DataPlaneService, RequestIntake, ExchangeObserver, SpeedFeed, BodyReader, WarmCopies, ProxyMetrics, RemoteExchanges],
  exports: [DataPlaneService, ExchangeObserver, WarmCopies, RemoteExchanges],
})
export class ProxyModule {}
