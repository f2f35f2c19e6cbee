import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { startJob, stopJobs } from '../../common/jobs.js';
import { RoutingService } from './routing.service.js';

const JOB = 'session-sweep';
/** Expired pins leave the directory (and the per-replica counts) at most this long after their TTL. */
const SWEEP_EVERY_MS = 1_000;

/**
 * The directory's TTL sweep: the only code that drops expired sessions, once a second. Reads
 * (/health, /metrics, the admin API) count live pins without sweeping, so a GET never changes state.
 */
@Injectable()
export class RoutingJobs implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    private readonly routing: RoutingService,
    private readonly scheduler: SchedulerRegistry,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  onApplicationBootstrap(): void {
    startJob(this.scheduler, JOB, SWEEP_EVERY_MS, () => this.sweep());
  }

  onApplicationShutdown(): void {
    stopJobs(this.scheduler, JOB);
  }

  private sweep(): void {
    try {
      this.routing.sweepSessions();
    } catch (e) {
      this.log.error({ err: e }, 'session sweep failed');
    }
  }
}
