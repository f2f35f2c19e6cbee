import { Module, RequestMethod, type MiddlewareConsumer, type NestModule } from '@nestjs/common';
import { HealthModule } from '../health/health.module.js';
import { RoutingModule } from '../routing/routing.module.js';
import { ExchangeObserver } from './exchange.observer.js';
import { ProxyMiddleware } from './proxy.middleware.js';

@Module({
  imports: [RoutingModule, HealthModule],
  providers: [ProxyMiddleware, ExchangeObserver],
  exports: [ExchangeObserver],
})
export class ProxyModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(ProxyMiddleware).forRoutes({ path: 'v1/*path', method: RequestMethod.ALL });
  }
}
