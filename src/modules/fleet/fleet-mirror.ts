import { Inject, Injectable } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { RouterConfig } from '../../config/router-config.js';
import { LeaderService } from '../cluster/leader.service.js';
import { RegistryService } from '../registry/registry.service.js';
import { recordedReplica } from './recorded-replica.js';
import { readStateFile } from './state-file.js';
import { startJob, stopJobs } from '../../common/jobs.js';

const MIRROR_EVERY_MS = 1_000;
const MIRROR_JOB = 'fleet-mirror';

/**
 * A follower's view of the fleet: the leader's state in Redis, mirrored into the local registry as
 * `shared` replicas (routed to once this router's own health checks pass; never stopped here).
 */
@Injectable()
export class FleetMirror {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: RouterConfig,
    private readonly leader: LeaderService,
    private readonly registry: RegistryService,
    private readonly scheduler: SchedulerRegistry,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  start(): void {
    if (this.timer !== undefined) return;
    this.syncLogged();
    this.timer = startJob(this.scheduler, MIRROR_JOB, MIRROR_EVERY_MS, () => this.syncLogged());
  }

  /** Stop mirroring and drop the mirrored replicas (this router now leads and adopts them). */
  stop(): void {
    stopJobs(this.scheduler, MIRROR_JOB);
    this.timer = undefined;
    for (const r of [...this.registry.list]) if (r.kind === 'shared') this.registry.remove(r.name);
  }

  /** One tick: a failing sync is logged and the next tick tries again (STYLE §7). */
  private syncLogged(): void {
    this.sync().catch((e: unknown) => this.log.error({ err: e }, 'fleet mirror sync failed'));
  }

  async sync(): Promise<void> {
    const json = await this.leader.readFleetState();
    if (json === undefined || this.timer === undefined) return;
    const read = readStateFile('redis', () => json);
    if (read.kind !== 'ok') {
      this.log.warn({ event: 'mirror_invalid' }, 'the fleet state in Redis is not readable; keeping the last view');
      return;
    }
    const wanted = new Map(read.state.replicas.map((e) => [e.slot, e]));
    for (const r of [...this.registry.list]) {
      if (r.kind === 'shared' && !wanted.has(r.name)) this.registry.remove(r.name);
    }
    for (const e of wanted.values()) {
      if (this.registry.get(e.slot) !== undefined) continue;
      const maxInflight = this.config.hosts.find((h) => h.name === e.host)?.maxInflight;
      const r = recordedReplica(e, 'shared', { host: e.host, devices: e.devices, pid: e.pid, logPath: '' }, { ready: false, maxInflight });
      this.registry.add(r);
    }
  }
}
