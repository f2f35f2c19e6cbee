import { Injectable, type OnModuleInit } from '@nestjs/common';
import { ShutdownService } from '../lifecycle/shutdown.service.js';
import { RedisService } from '../cluster/redis.service.js';
import { RegistryService } from '../registry/registry.service.js';
import { FleetService, untilIdleOr } from './fleet.service.js';
import { StateService } from '../state/state.service.js';

/**
 * The fleet's shutdown step (contract §6): every launched replica drained and stopped, in-flight
 * requests finished (bounded by the drain timeout, then cut), the state file written last. With a
 * shared Redis the fleet is handed over instead: the next leader adopts it.
 */
@Injectable()
export class FleetShutdown implements OnModuleInit {
  constructor(
    private readonly fleet: FleetService,
    private readonly state: StateService,
    private readonly registry: RegistryService,
    private readonly redis: RedisService,
    private readonly shutdown: ShutdownService,
  ) {}

  onModuleInit(): void {
    this.shutdown.register('drain', (deadline) => this.run(deadline));
  }

  private async run(deadline: number): Promise<void> {
    const stop = this.redis.enabled ? Promise.resolve() : this.fleet.stopAll(deadline);
    await Promise.all([stop, this.waitInflight(deadline)]);
    await this.state.write();
  }

  private async waitInflight(deadline: number): Promise<void> {
    await untilIdleOr(deadline, this.registry.list);
    for (const r of this.registry.list) for (const x of [...r.inflight]) x.abort('the router is shutting down and its drain timed out');
  }
}
