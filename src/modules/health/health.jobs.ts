import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { HealthService } from './health.service.js';

const JOB = 'health-poll';

/**
 * The poller: a fixed-period interval (no drift with probe time) that only calls the service and
 * never lets a failing tick kill the loop (STYLE §7).
 */
@Injectable()
export class HealthJobs implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    private readonly health: HealthService,
    private readonly scheduler: SchedulerRegistry,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  onApplicationBootstrap(): void {
    const handle = setInterval(() => this.run(), this.health.settings.intervalMs);
    handle.unref();
    this.scheduler.addInterval(JOB, handle);
    this.run();
  }

  onApplicationShutdown(): void {
    if (this.scheduler.doesExist('interval', JOB)) this.scheduler.deleteInterval(JOB);
  }

  private run(): void {
    this.health.tick().catch((e: unknown) => this.log.error({ err: e }, 'health tick failed'));
  }
}
