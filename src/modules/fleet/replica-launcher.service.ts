import { Inject, Injectable } from '@nestjs/common';
import { posix } from 'node:path';
import { RouterConfig, type HostSpec, type SlotSpec } from '../../config/router-config.js';
import { buildLaunchArgv, buildLaunchEnv, buildStopArgv } from '../../config/templates.js';
import { DomainError } from '../../common/errors/domain-error.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { PROCESS_ENV, type ProcessEnv } from '../../config/process-env.js';
import { LauncherFactory } from '../launcher/launcher.factory.js';
import type { ExitInfo, PidIdentity } from '../launcher/launcher.transport.js';
import { createEndpoint } from '../registry/replica-endpoint.js';
import { Replica } from '../registry/replica.js';
import { RegistryService } from '../registry/registry.service.js';
import { FleetBook } from './fleet-book.service.js';
import { LaunchRecord } from './launch-record.js';
import { ReplicaStopper } from './replica-stopper.service.js';
import { portTaken } from './port-check.js';
import { FOREIGN } from './slot-table.js';

const LOG_TAIL_LINES = 20;

/**
 * Launching (contract §6): reserve slots synchronously, spawn through the host's transport, never wait
 * for the model; then watch the launch (timeout, early exit) and report a failure with its log
 * tail before stopping it. Promotion is health's job, not this one's.
 */
@Injectable()
export class ReplicaLauncher {
  constructor(
    private readonly config: RouterConfig,
    private readonly book: FleetBook,
    private readonly registry: RegistryService,
    private readonly launchers: LauncherFactory,
    private readonly stopper: ReplicaStopper,
    @Inject(PROCESS_ENV) private readonly env: ProcessEnv,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  /**
   * Launch `count` replicas (optionally on one host, or only on hosts serving `model`, contract §4.3).
   * All slots are reserved first, synchronously: either every launch gets a slot or none is
   * started (409 with the capacity).
   */
  async launch(count: number, hostName: string | undefined, model?: string): Promise<Replica[]> {
    if (hostName !== undefined && !this.config.hosts.some((h) => h.name === hostName)) {
      throw new DomainError('unknown_host', `no host named '${hostName}' is declared in the config`, { capacity: this.book.slots.capacity() });
    }
    const on = model === undefined ? hostName : this.hostsServing(model, hostName);
    const reserved: Array<{ slot: SlotSpec; holder: string }> = [];
    for (let i = 0; i < count; i++) {
      const holder = this.book.holder('launch');
      const r = this.book.slots.reserveNext(holder, on);
      if (!r.ok) {
        for (const x of reserved) this.book.slots.release(x.slot.name, x.holder);
        const detail = count > 1 ? `${r.message}; cannot launch ${count} replicas (${reserved.length} slots were free)` : r.message;
        throw new DomainError(r.code, detail, { capacity: this.book.slots.capacity() });
      }
      reserved.push({ slot: r.slot, holder });
    }
    const results = await Promise.allSettled(reserved.map((x) => this.launchInto(x.slot, x.holder)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined && results.every((r) => r.status === 'rejected')) throw failed.reason;
    return results.filter((r): r is PromiseFulfilledResult<Replica> => r.status === 'fulfilled').map((r) => r.value);
  }

  /** Names of the hosts whose replicas serve `model` (its `served_model_name`, else `model`); 404 when none does. */
  private hostsServing(model: string, hostName: string | undefined): ReadonlySet<string> {
    const hosts = this.config.hosts.filter((h) => (h.servedModelName ?? h.model) === model && (hostName === undefined || h.name === hostName));
    if (hosts.length > 0) return new Set(hosts.map((h) => h.name));
    const where = hostName === undefined ? 'no host declared in the config' : `host '${hostName}'`;
    throw new DomainError('unknown_model', `${where} serves the model '${model}'`, { capacity: this.book.slots.capacity() });
  }

  /** The record of a replica this router launched or adopted on `slot` (adoption's entry point); `add` puts it in the table. */
  recordFor(replica: Replica, host: HostSpec, slot: SlotSpec, holder: string, add = true): LaunchRecord {
    const transport = this.launchers.forHost(host);
    const env = transport.kind === 'local' ? buildLaunchEnv(host, slot, this.env) : buildLaunchEnv(host, slot, {});
    const rec = new LaunchRecord(replica, host, slot, transport, buildStopArgv(host, slot), env, holder);
    if (add) this.registry.add(replica);
    this.book.records.set(replica.name, rec);
    return rec;
  }

  private async launchInto(slot: SlotSpec, holder: string): Promise<Replica> {
    const host = this.hostOf(slot);
    const argv = buildLaunchArgv(host, slot);
    const logPath = posix.join(host.logDir, `${slot.name}.log`);
    const model = host.servedModelName ?? host.model;
    const replica = new Replica(
      slot.name,
      'launched',
      createEndpoint({ scheme: 'http', host: slot.address, port: slot.port }),
      {
        slot: slot.name,
        host: host.name,
        devices: slot.devices,
        pid: null,
        logPath,
        launchedAt: new Date().toISOString(),
        ...(model !== undefined ? { model } : {}),
      },
      { ready: false, maxInflight: host.maxInflight, engineMetrics: host.engineMetrics },
    );
    if (await portTaken(slot.address, slot.port, this.config.health.timeoutMs)) {
      // Something already serves there (a replica whose record was lost, another program): never
      // launch onto it. The slot is kept for that server until its port is free (checkLaunching).
      this.book.slots.release(slot.name, holder);
      this.book.slots.reserve(slot.name, `${FOREIGN}${slot.name}`);
      const why = `port ${slot.port} on ${slot.address} is already in use; slot ${slot.name} is kept reserved until it is free`;
      this.book.reportOrphan({ slot: slot.name, host: host.name, devices: slot.devices, address: slot.address, port: slot.port, pid: null, reason: why });
      this.book.stats.launchFailures++;
      this.log.error({ event: 'launch_failed', replica: slot.name, host: host.name, devices: slot.devices, err: why }, `launch failed: ${why}`);
      throw new DomainError('launch_failed', `launch failed: ${why}`, { capacity: this.book.slots.capacity() });
    }
    const rec = this.recordFor(replica, host, slot, holder);
    try {
      const spawning = rec.transport.launch({ slot, host, argv, env: rec.env, logPath, ...(host.workdir !== undefined ? { workdir: host.workdir } : {}) });
      rec.spawning = spawning;
      const proc = await spawning;
      replica.placement!.pid = proc.pid;
      proc.exited?.then(
        (info) => this.exited(rec, info),
        () => undefined,
      );
    } catch (e) {
      this.book.records.delete(replica.name);
      this.registry.remove(replica.name);
      this.book.slots.release(slot.name, holder);
      this.book.stats.launchFailures++;
      const msg = `launch failed: ${(e as Error).message}`;
      this.log.error({ event: 'launch_failed', replica: slot.name, host: host.name, devices: slot.devices, err: (e as Error).message }, msg);
      throw new DomainError('launch_failed', msg, { capacity: this.book.slots.capacity() });
    }
    this.book.stats.launches++;
    this.log.info(
      { event: 'launch', replica: slot.name, host: host.name, devices: slot.devices, pid: replica.placement!.pid, url: replica.url, log_path: logPath },
      `launched ${slot.name} on ${host.name} (devices ${slot.devices.join(',')}); it becomes routable once healthy`,
    );
    this.book.persist();
    return replica;
  }

  /** A launched process ended without being asked to: report it with its log tail, free its slot. */
  private async exited(rec: LaunchRecord, info: ExitInfo): Promise<void> {
    if (rec.stopRequested) return;
    const how = info.signal !== null ? `was killed by ${info.signal}` : `exited with code ${info.code}`;
    await this.fail(rec, `process ${how}${rec.replica.everReady ? '' : ' before becoming ready'}`, 'exits');
  }

  /** Launch-timeout and liveness job: stop replicas not ready in time; notice vanished remote ones; free foreign slots. */
  async checkLaunching(): Promise<void> {
    await this.recheckForeign();
    const now = performance.now();
    for (const rec of [...this.book.records.values()]) {
      const r = rec.replica;
      if (r.everReady || rec.stopRequested || r.failed) continue;
      if (now - rec.startedAt > this.config.launchTimeoutMs) {
        await this.fail(rec, `not ready within --launch-timeout ${this.config.launchTimeoutMs / 1000} s`, 'launchTimeouts');
        continue;
      }
      const pid = r.placement?.pid;
      if (rec.transport.kind === 'ssh' && pid != null && !(await rec.transport.isAlive(pid).catch(() => true))) {
        // The same event as a local child exiting before it was ready (exited()): counted as `exit`.
        await this.fail(rec, 'remote process is gone before becoming ready', 'exits');
      }
    }
  }

  /** A slot kept for a server the router does not own is freed once nothing answers on its port. */
  private async recheckForeign(): Promise<void> {
    const held = this.book.slots.slots.filter((s) => this.book.slots.holder(s.name) === `${FOREIGN}${s.name}`);
    await Promise.all(
      held.map(async (s) => {
        if (await portTaken(s.address, s.port, this.config.health.timeoutMs)) return;
        if (!this.book.slots.release(s.name, `${FOREIGN}${s.name}`)) return;
        this.log.info({ event: 'slot_freed', slot: s.name, port: s.port }, `nothing answers on port ${s.port} any more; slot ${s.name} is free`);
      }),
    );
  }

  /**
   * Report and stop a launch that went wrong, once: two checks that overlap (a slow ssh liveness
   * probe outlasting the check interval) or an exit racing a timeout count one event, not two.
   */
  private async fail(rec: LaunchRecord, reason: string, counter: 'exits' | 'launchTimeouts'): Promise<void> {
    if (rec.failure !== undefined || rec.stopRequested) return;
    rec.failure = reason;
    this.book.stats[counter]++;
    const r = rec.replica;
    r.markFailed();
    const logPath = r.placement!.logPath;
    const logTail = await rec.transport.tailLog(logPath, LOG_TAIL_LINES).catch((e: Error) => [`(log unavailable: ${e.message})`]);
    const report = {
      name: r.name,
      slot: rec.slot.name,
      host: rec.host.name,
      devices: rec.slot.devices,
      reason,
      log_path: logPath,
      log_tail: logTail,
      at: new Date().toISOString(),
    };
    this.book.reportFailure(report);
    this.log.error({ event: 'replica_failed', replica: r.name, ...report }, `replica ${r.name} failed: ${reason}; log ${report.log_path}`);
    await this.stopper.stop(rec);
  }

  /** Whether `pid` is provably the process serving `port` on the slot's host (the transport checks). */
  identify(slot: SlotSpec, pid: number, port: number): Promise<PidIdentity> {
    return this.launchers.forHost(this.hostOf(slot)).identify(pid, port);
  }

  hostOf(slot: SlotSpec): HostSpec {
    const h = this.config.hosts.find((x) => x.name === slot.host);
    if (h === undefined) throw new Error(`slot ${slot.name} names unknown host ${slot.host}`);
    return h;
  }
}
