import { Module } from '@nestjs/common';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { ProxyModule } from '../proxy/proxy.module.js';
import { WorkerPool } from './worker-pool.service.js';

/**
 * The worker processes of `--workers N` (docs/workers.md): the pool that forks
 * them and hands them connections (the primary's side of their requests is the proxy's RemoteExchanges).
 */
@Module({
  imports: [ProxyModule, LifecycleModule],
  providers: [WorkerPool],
  exports: [WorkerPool],
})
export class WorkersModule {}
