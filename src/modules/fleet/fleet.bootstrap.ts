import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { LeaderService } from '../cluster/leader.service.js';
import { FleetAdoption } from './fleet-adoption.service.js';
import { FleetService } from './fleet.service.js';
import { FleetMirror } from './fleet-mirror.service.js';
import { StateService } from '../state/state.service.js';
import { STATE_VERSION, type FleetState } from '../state/state-file.js';
import { startJob, stopJobs } from '../../common/jobs.js';

const JOBS = { launchCheck: 'fleet-launch-check', pinFlush: 'state-pin-flush' } as const;

/**
 * Start-up of the fleet: lead it (adopt what was recorded, through FleetAdoption, then launch up to
 * `--initial-replicas`) or mirror the leader's, follow leadership changes, run the launch-timeout
 * job. Shutdown is FleetShutdown's.
 */
@Injectable()
export class FleetBootstrap implements OnApplicationBootstrap, OnApplicationShutdown {
  constructor(
    private readonly config: RouterConfig,
    private readonly fleet: FleetService,
    private readonly state: StateService,
    private readonly adoption: FleetAdoption,
    private readonly scheduler: SchedulerRegistry,
    private readonly leader: LeaderService,
    private readonly mirror: FleetMirror,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const recorded = this.state.load();
    await this.leader.start();
    if (this.leader.isLeader) await this.lead(recorded);
    else this.mirror.start();
    this.leader.onChange(async (leading) => {
      if (leading) {
        this.mirror.stop();
        await this.lead(undefined);
      } else {
        this.fleet.relinquish();
        this.mirror.start();
      }
    });
    const flush = this.state.startPinFlush();
    if (flush !== undefined) this.scheduler.addInterval(JOBS.pinFlush, flush);
    const every = Math.max(100, Math.min(1_000, this.config.launchTimeoutMs / 4, this.config.health.intervalMs));
    startJob(this.scheduler, JOBS.launchCheck, every, () => {
      this.fleet.checkLaunching().catch((e: unknown) => this.log.error({ err: e }, 'launch check failed'));
    });
  }

  /**
   * Take the fleet: adopt what was recorded (Redis first, else this router's mirrored view, else
   * the state file), reconcile every slot still open, drop the mirrored replicas nobody could adopt,
   * then launch up to the target. The mirrored replicas stay routable throughout (issue 26).
   */
  private async lead(fromFile: FleetState | undefined): Promise<void> {
    const mirrored = this.fleet.sharedEntries();
    const view: FleetState | undefined =
      mirrored.length > 0 ? { version: STATE_VERSION, epoch: this.leader.epoch, replicas: mirrored, sessions: [] } : undefined;
    const recorded = (await this.state.loadShared()) ?? view ?? fromFile;
    if (recorded !== undefined) await this.adoption.adopt(recorded);
    await this.adoption.reconcile([...mirrored, ...(fromFile?.replicas ?? [])]);
    this.fleet.dropShared();
    if (this.state.enabled) this.fleet.persist();
    await this.state.settled(); // the adopted fleet is on disk before the router reports ready
    await this.launchInitial();
  }

  onApplicationShutdown(): void {
    stopJobs(this.scheduler, JOBS.launchCheck, JOBS.pinFlush);
  }

  /** `--initial-replicas` is a target that counts adopted replicas (contract §6). */
  private async launchInitial(): Promise<void> {
    const missing = this.config.initialReplicas - this.fleet.launchedCount;
    if (missing <= 0) return;
    const results = await Promise.allSettled(Array.from({ length: missing }, () => this.fleet.launch(1)));
    for (const r of results) {
      if (r.status === 'rejected')
        this.log.error({ event: 'initial_launch_failed', err: (r.reason as Error).message }, `initial launch failed: ${(r.reason as Error).message}`);
    }
  }
}
