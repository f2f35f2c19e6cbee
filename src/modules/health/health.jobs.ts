import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { HealthService } from './health.service.js';
import { ModelDiscovery } from './model-discovery.js';

const JOB = 'health-poll';
const MODELS_JOB = 'models-refresh';

/**
 * The poller: a fixed-period interval (no drift with probe time) that only calls the service and
 * never lets a failing tick kill the loop (STYLE §7).
 */
@Injectable()
export class HealthJobs implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    private readonly health: HealthService,
    private readonly models: ModelDiscovery,
    private readonly scheduler: SchedulerRegistry,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  onApplicationBootstrap(): void {
    const handle = setInterval(() => this.run(), this.health.settings.intervalMs);
    handle.unref();
    this.scheduler.addInterval(JOB, handle);
    this.run();
    // Model lists (SPEC §4.3): read at start, then every --models-refresh.
    const models = setInterval(() => this.models.refresh(), this.models.refreshMs);
    models.unref();
    this.scheduler.addInterval(MODELS_JOB, models);
    this.models.refresh();
  }

  onApplicationShutdown(): void {
    for (const job of [JOB, MODELS_JOB]) if (this.scheduler.doesExist('interval', job)) this.scheduler.deleteInterval(job);
  }

  private run(): void {
    this.health.tick().catch((e: unknown) => this.log.error({ err: e }, 'health tick failed'));
  }
}
