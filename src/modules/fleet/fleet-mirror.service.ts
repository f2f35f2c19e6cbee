import { Inject, Injectable } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { RouterConfig } from '../../config/router-config.js';
import { LeaderService } from '../cluster/leader.service.js';
import { LauncherFactory } from '../launcher/launcher.factory.js';
import { RegistryService } from '../registry/registry.service.js';
import { recordedReplica } from './recorded-replica.js';
import { readStateFile, type StateReplica } from '../state/state-file.js';
import { startJob, stopJobs } from '../../common/jobs.js';

const MIRROR_EVERY_MS = 1_000;
const MIRROR_JOB = 'fleet-mirror';

/**
 * A follower's view of the fleet: the leader's state in Redis, mirrored into the local registry as
 * `shared` replicas (routed to once this router's own health checks pass; never stopped here).
 * The view outlives Redis (issue 26): when the state cannot be read, is missing (Redis back
 * empty) or this router stops mirroring to lead, nothing is removed; only a state the leader
 * published drops a replica. A recorded pid is shown only once this router proved it serves the
 * replica's port, so a dead pid is never listed as a ready replica's.
 */
@Injectable()
export class FleetMirror {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: RouterConfig,
    private readonly leader: LeaderService,
    private readonly registry: RegistryService,
    private readonly launchers: LauncherFactory,
    private readonly scheduler: SchedulerRegistry,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  start(): void {
    if (this.timer !== undefined) return;
    this.syncLogged();
    this.timer = startJob(this.scheduler, MIRROR_JOB, MIRROR_EVERY_MS, () => this.syncLogged());
  }

  /** Stop mirroring, keeping the view: this router now leads and adopts the mirrored replicas in place. */
  stop(): void {
    stopJobs(this.scheduler, MIRROR_JOB);
    this.timer = undefined;
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
    this.leader.observeEpoch(read.state.epoch);
    const wanted = new Map(read.state.replicas.map((e) => [e.slot, e]));
    for (const r of [...this.registry.list]) {
      const e = r.kind === 'shared' ? wanted.get(r.name) : undefined;
      if (r.kind !== 'shared') continue;
      // Gone from the leader's fleet, or moved to another address: drop (and re-add below).
      if (e === undefined || e.address !== r.endpoint.host || e.port !== r.endpoint.port) this.registry.remove(r.name);
      else if (e.pid !== r.placement?.pid && e.pid !== this.unproven.get(r.name)) r.placement!.pid = await this.provenPid(e);
    }
    for (const e of wanted.values()) {
      if (this.registry.get(e.slot) !== undefined) continue;
      const host = this.config.hosts.find((h) => h.name === e.host);
      const pid = await this.provenPid(e);
      if (this.timer === undefined || this.registry.get(e.slot) !== undefined) return;
      const r = recordedReplica(
        e,
        'shared',
        { host: e.host, devices: e.devices, pid, logPath: '' },
        { ready: false, maxInflight: host?.maxInflight, engineMetrics: host?.engineMetrics },
      );
      this.registry.add(r);
    }
  }

  /** Recorded pids this router could not prove, by replica (logged once each). */
  private readonly unproven = new Map<string, number>();

  /** The entry's pid if it provably serves the entry's port on its host, else null (logged once). */
  private async provenPid(e: StateReplica): Promise<number | null> {
    if (e.pid === null) return null;
    const host = this.config.hosts.find((h) => h.name === e.host);
    const id =
      host === undefined
        ? { proven: false as const, reason: `host ${e.host} is not declared here` }
        : await this.launchers.forHost(host).identify(e.pid, e.port);
    if (id.proven) {
      this.unproven.delete(e.slot);
      return e.pid;
    }
    if (this.unproven.get(e.slot) !== e.pid) {
      this.unproven.set(e.slot, e.pid);
      this.log.warn(
        { event: 'mirror_pid_unproven', replica: e.slot, recorded_pid: e.pid, reason: id.reason },
        `the leader records pid ${e.pid} for ${e.slot}, which this router cannot prove (${id.reason}); shown without a pid`,
      );
    }
    return null;
  }
}
