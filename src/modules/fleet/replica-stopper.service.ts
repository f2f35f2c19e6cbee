import { Inject, Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import type { StopSpec } from '../launcher/launcher.transport.js';
import { answersAfter } from '../health/probe.js';
import { RegistryService } from '../registry/registry.service.js';
import { RoutingService } from '../routing/routing.service.js';
import { FleetBook } from './fleet-book.service.js';
import type { LaunchRecord } from './launch-record.js';
import { traced } from '../../common/tracing/tracing.js';
import { FOREIGN } from './slot-table.js';

/** SIGKILL this long after SIGTERM (contract §6). */
const KILL_AFTER_MS = 10_000;

/**
 * Stopping a launched or adopted replica (contract §6), once however often it is asked: `stop_command`
 * or signals to its proven process group, escalation when it still answers after `--stop-grace`,
 * and the slot freed only when it stopped answering. Never signals a pid that was not proven.
 */
@Injectable()
export class ReplicaStopper {
  constructor(
    private readonly config: RouterConfig,
    private readonly book: FleetBook,
    private readonly registry: RegistryService,
    private readonly routing: RoutingService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  /** A replica can be stopped by its proven pid or by its host's stop_command. */
  canStop(rec: LaunchRecord): boolean {
    return rec.replica.placement?.pid != null || rec.stopArgv !== undefined;
  }

  /** Stop the process once (concurrent calls share it), then free the slot when it stops answering. */
  stop(rec: LaunchRecord): Promise<void> {
    rec.stopped ??= traced('fleet.stop', { 'affinity_router.replica': rec.name }, () => this.run(rec));
    return rec.stopped;
  }

  private async run(rec: LaunchRecord): Promise<void> {
    const r = rec.replica;
    rec.stopRequested = true;
    r.beginStop();
    this.routing.releasePins(r);
    const pid = r.placement?.pid ?? null;
    if (!this.canStop(rec)) {
      // Adopted without a proven pid (a pypto-serving-router state file, a dead or reused pid)
      // and no stop_command: a process whose identity was not proven is never signalled. It
      // keeps running, so it stays in the state file and the next start adopts it again.
      rec.leftRunning = `cannot stop ${r.name}: its pid is not known (or not proven) and the host has no stop_command; it keeps running; stop it by hand`;
      if (!r.removed) this.registry.remove(r.name);
      this.log.warn({ event: 'stop_skipped', replica: r.name, host: rec.host.name, devices: rec.slot.devices }, rec.leftRunning);
      this.book.persist();
      return;
    }
    const how = { env: rec.env, ...(rec.host.workdir !== undefined ? { workdir: rec.host.workdir } : {}), killAfterMs: KILL_AFTER_MS };
    await this.runStop(rec, { pid, ...(rec.stopArgv ? { stopArgv: rec.stopArgv } : {}), ...how });
    let answering = await answersAfter(r.endpoint, this.config.health.path, this.config.stopGraceMs);
    if (answering && rec.stopArgv !== undefined && pid !== null) {
      // The stop_command ran (or failed) and the replica still answers: signal its proven pid,
      // as a host without stop_command would have.
      this.log.warn(
        { event: 'stop_escalated', replica: r.name, pid },
        `${r.name} still answers ${this.config.stopGraceMs / 1000} s after its stop_command; signalling its process group ${pid}`,
      );
      await this.runStop(rec, { pid, ...how });
      answering = await answersAfter(r.endpoint, this.config.health.path, this.config.stopGraceMs);
    }
    if (!r.removed) this.registry.remove(r.name);
    if (answering && rec.failure !== undefined && pid !== null && !(await rec.transport.isAlive(pid).catch(() => true))) {
      // A failed launch whose process is gone while something else answers on its port (it lost
      // the race for the port): that server is not this replica. The launch frees its slot, which
      // is kept for the other server until its port closes (issue 26).
      this.book.records.delete(r.name);
      this.book.slots.release(rec.slot.name, rec.holder);
      this.book.slots.reserve(rec.slot.name, `${FOREIGN}${rec.slot.name}`);
      const reason = `launch of ${r.name} failed and another server answers on ${r.url}; slot ${rec.slot.name} is kept reserved until that port is free`;
      this.book.reportOrphan({
        slot: rec.slot.name,
        host: rec.host.name,
        devices: rec.slot.devices,
        address: r.endpoint.host,
        port: r.endpoint.port,
        pid: null,
        reason,
      });
      this.log.error({ event: 'port_taken', replica: r.name, url: r.url }, reason);
      this.book.persist();
      return;
    }
    if (answering) {
      // Still serving: freeing the slot would launch a second replica onto busy devices. It
      // stays reserved and recorded (the next start adopts it); an operator must stop it.
      rec.leftRunning = `${r.name} still answers at ${r.url} after the stop; its slot ${rec.slot.name} stays reserved and it stays in the state file; stop it by hand`;
      this.log.error({ event: 'stop_incomplete', replica: r.name, host: rec.host.name, devices: rec.slot.devices, url: r.url, pid }, rec.leftRunning);
      this.book.persist();
      return;
    }
    this.book.records.delete(r.name);
    this.book.slots.release(rec.slot.name, rec.holder);
    this.book.stats.stops++;
    this.log.info({ event: 'stop', replica: r.name, host: rec.host.name, devices: rec.slot.devices, pid }, `stopped ${r.name}; slot ${rec.slot.name} is free`);
    this.book.persist();
  }

  private async runStop(rec: LaunchRecord, spec: StopSpec): Promise<void> {
    try {
      await rec.transport.stop(spec);
    } catch (e) {
      const r = rec.replica;
      this.log.error({ event: 'stop_failed', replica: r.name, err: (e as Error).message }, `stopping ${r.name} failed: ${(e as Error).message}`);
    }
  }
}
