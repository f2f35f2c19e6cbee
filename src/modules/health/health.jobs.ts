import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { HealthService } from './health.service.js';
import { ModelDiscovery } from './model-discovery.service.js';
import { startJob, stopJobs } from '../../common/jobs.js';

const JOBS = { poll: 'health-poll', models: 'models-refresh' } as const;

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
    startJob(this.scheduler, JOBS.poll, this.health.settings.intervalMs, () => this.run());
    this.run();
    // Model lists (contract §4.3): read at start, then every --models-refresh.
    startJob(this.scheduler, JOBS.models, this.models.refreshMs, () => this.models.refresh());
    this.models.refresh();
  }

  onApplicationShutdown(): void {
    stopJobs(this.scheduler, JOBS.poll, JOBS.models);
  }

  /** After a config reload: the probe period may have changed (the next tick runs one new period from now). */
  reschedule(): void {
    stopJobs(this.scheduler, JOBS.poll);
    startJob(this.scheduler, JOBS.poll, this.health.settings.intervalMs, () => this.run());
  }

  private run(): void {
    this.health.tick().catch((e: unknown) => this.log.error({ err: e }, 'health tick failed'));
  }
}
