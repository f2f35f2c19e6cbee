import { Inject, Injectable } from '@nestjs/common';
import { posix } from 'node:path';
import { RouterConfig, type HostSpec, type SlotSpec } from '../../config/router-config.js';
import { buildLaunchArgv, buildLaunchEnv, buildStopArgv } from '../../config/templates.js';
import { DomainError } from '../../common/errors/domain-error.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { PROCESS_ENV, type ProcessEnv } from '../../common/process-env.js';
import { LauncherFactory } from '../launcher/launcher.factory.js';
import type { ExitInfo, PidIdentity } from '../launcher/launcher.transport.js';
import { createEndpoint } from '../registry/replica-endpoint.js';
import { Replica } from '../registry/replica.js';
import { RegistryService } from '../registry/registry.service.js';
import { RoutingService } from '../routing/routing.service.js';
import { answersAfter } from '../health/probe.js';
import { LaunchRecord } from './launch-record.js';
import { SlotTable, type Capacity } from './slot-table.js';
import { StateService } from './state.service.js';
import { LeaderService } from '../cluster/leader.service.js';
import type { StateReplica } from './state-file.js';
import type { DrainStatus, FailureReport, OrphanReport } from './fleet-reports.js';

export type { DrainStatus, FailureReport, OrphanReport };

/** SIGKILL this long after SIGTERM (SPEC §6). */
const KILL_AFTER_MS = 10_000;
const LOG_TAIL_LINES = 20;
const MAX_REPORTS = 50;

/**
 * The control plane (SPEC §6): places replicas into device slots, launches them through the host's
 * transport, promotes nothing itself (health does), drains and stops them, adopts survivors.
 */
@Injectable()
export class FleetService {
  readonly slots: SlotTable;
  private readonly records = new Map<string, LaunchRecord>();
  readonly orphans: OrphanReport[] = [];
  readonly failures: FailureReport[] = [];
  private seq = 0;
  /** Lifetime counts for /metrics. */
  readonly stats = { launches: 0, stops: 0, adoptions: 0, launchFailures: 0, launchTimeouts: 0, exits: 0 };

  constructor(
    private readonly config: RouterConfig,
    private readonly registry: RegistryService,
    private readonly routing: RoutingService,
    private readonly launchers: LauncherFactory,
    private readonly state: StateService,
    private readonly leader: LeaderService,
    @Inject(PROCESS_ENV) private readonly env: ProcessEnv,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {
    this.slots = new SlotTable(config.slots, config.maxReplicas);
  }

  capacity(): Capacity {
    return this.slots.capacity();
  }

  record(name: string): LaunchRecord | undefined {
    return this.records.get(name);
  }

  get launchedCount(): number {
    return this.records.size;
  }

  /**
   * Launch `count` replicas (optionally on one host). All slots are reserved first, synchronously:
   * either every launch gets a slot or none is started (409 with the capacity).
   */
  async launch(count = 1, hostName?: string): Promise<Replica[]> {
    this.assertLeader();
    if (hostName !== undefined && !this.config.hosts.some((h) => h.name === hostName)) {
      throw new DomainError('unknown_host', `no host named '${hostName}' is declared in the config`, { capacity: this.capacity() });
    }
    const reserved: Array<{ slot: SlotSpec; holder: string }> = [];
    for (let i = 0; i < count; i++) {
      const holder = `launch#${++this.seq}`;
      const r = this.slots.reserveNext(holder, hostName);
      if (!r.ok) {
        for (const x of reserved) this.slots.release(x.slot.name, x.holder);
        const detail = count > 1 ? `${r.message}; cannot launch ${count} replicas (${reserved.length} slots were free)` : r.message;
        throw new DomainError(r.code, detail, { capacity: this.capacity() });
      }
      reserved.push({ slot: r.slot, holder });
    }
    const results = await Promise.allSettled(reserved.map((x) => this.launchInto(x.slot, x.holder)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined && results.every((r) => r.status === 'rejected')) throw failed.reason;
    return results.filter((r): r is PromiseFulfilledResult<Replica> => r.status === 'fulfilled').map((r) => r.value);
  }

  private async launchInto(slot: SlotSpec, holder: string): Promise<Replica> {
    const host = this.hostOf(slot);
    const transport = this.launchers.forHost(host);
    const argv = buildLaunchArgv(host, slot);
    const fullEnv = buildLaunchEnv(host, slot, this.env);
    const env = transport.kind === 'local' ? fullEnv : buildLaunchEnv(host, slot, {});
    const logPath = posix.join(host.logDir, `${slot.name}.log`);
    const replica = new Replica(slot.name, 'launched', createEndpoint({ scheme: 'http', host: slot.address, port: slot.port }), {
      slot: slot.name,
      host: host.name,
      devices: slot.devices,
      pid: null,
      logPath,
      launchedAt: new Date().toISOString(),
      ...(host.servedModelName ?? host.model ? { model: host.servedModelName ?? host.model } : {}),
    }, false, host.maxInflight);
    const rec = new LaunchRecord(replica, host, slot, transport, buildStopArgv(host, slot), env, holder);
    this.registry.add(replica);
    this.records.set(replica.name, rec);
    try {
      const proc = await transport.launch({ slot, host, argv, env, logPath, ...(host.workdir !== undefined ? { workdir: host.workdir } : {}) });
      replica.placement!.pid = proc.pid;
      proc.exited?.then((info) => this.exited(rec, info), () => undefined);
    } catch (e) {
      this.records.delete(replica.name);
      this.registry.remove(replica.name);
      this.slots.release(slot.name, holder);
      this.stats.launchFailures++;
      const msg = `launch failed: ${(e as Error).message}`;
      this.log.error({ event: 'launch_failed', replica: slot.name, host: host.name, devices: slot.devices, err: (e as Error).message }, msg);
      throw new DomainError('launch_failed', msg, { capacity: this.capacity() });
    }
    this.stats.launches++;
    this.log.info(
      { event: 'launch', replica: slot.name, host: host.name, devices: slot.devices, pid: replica.placement!.pid, url: replica.url, log_path: logPath },
      `launched ${slot.name} on ${host.name} (devices ${slot.devices.join(',')}); it becomes routable once healthy`,
    );
    this.persist();
    return replica;
  }

  /** A launched process ended without being asked to: report it with its log tail, free its slot. */
  private async exited(rec: LaunchRecord, info: ExitInfo): Promise<void> {
    if (rec.stopRequested) return;
    const how = info.signal !== null ? `was killed by ${info.signal}` : `exited with code ${info.code}`;
    this.stats.exits++;
    await this.fail(rec, `process ${how}${rec.replica.everReady ? '' : ' before becoming ready'}`);
  }

  /** Launch-timeout and liveness job: stop replicas not ready in time; notice vanished remote ones. */
  async checkLaunching(): Promise<void> {
    const now = performance.now();
    for (const rec of [...this.records.values()]) {
      const r = rec.replica;
      if (r.everReady || rec.stopRequested || r.failed) continue;
      if (now - rec.startedAt > this.config.launchTimeoutMs) {
        this.stats.launchTimeouts++;
        await this.fail(rec, `not ready within --launch-timeout ${this.config.launchTimeoutMs / 1000} s`);
        continue;
      }
      const pid = r.placement?.pid;
      if (rec.transport.kind === 'ssh' && pid != null && !(await rec.transport.isAlive(pid).catch(() => true))) {
        // The same event as a local child exiting before it was ready (exited()): counted as `exit`.
        this.stats.exits++;
        await this.fail(rec, 'remote process is gone before becoming ready');
      }
    }
  }

  private async fail(rec: LaunchRecord, reason: string): Promise<void> {
    if (rec.failure !== undefined || rec.stopRequested) return;
    rec.failure = reason;
    const r = rec.replica;
    r.failed = true;
    r.ready = false;
    const logTail = await rec.transport.tailLog(r.placement!.logPath, LOG_TAIL_LINES).catch((e: Error) => [`(log unavailable: ${e.message})`]);
    const report: FailureReport = {
      name: r.name,
      slot: rec.slot.name,
      host: rec.host.name,
      devices: rec.slot.devices,
      reason,
      log_path: r.placement!.logPath,
      log_tail: logTail,
      at: new Date().toISOString(),
    };
    this.failures.unshift(report);
    this.failures.length = Math.min(this.failures.length, MAX_REPORTS);
    this.log.error({ event: 'replica_failed', replica: r.name, ...report }, `replica ${r.name} failed: ${reason}; log ${report.log_path}`);
    await this.stop(rec);
  }

  /** Drain then stop a launched replica (SPEC §6). A second call joins the first drain. */
  remove(name: string): { rec: LaunchRecord; done: Promise<void> } {
    const r = this.registry.get(name);
    if (r?.kind === 'shared') this.assertLeader();
    const rec = this.records.get(name);
    if (r === undefined && rec === undefined) throw new DomainError('unknown_replica', `no replica named '${name}'`);
    if (rec === undefined) throw new DomainError('not_launched', `replica '${name}' was not launched by this router`, { capacity: this.capacity() });
    if (rec.drain === undefined && !this.canStop(rec)) {
      throw new DomainError(
        'not_stoppable',
        `the router cannot stop '${name}': it was adopted without a proven pid and host '${rec.host.name}' has no stop_command; ` +
          'take it out of rotation with PATCH {"draining": true} and stop it by hand',
        { capacity: this.capacity() },
      );
    }
    rec.drain ??= this.drainAndStop(rec, performance.now() + this.config.drainTimeoutMs);
    return { rec, done: rec.drain };
  }

  /** A replica can be stopped by its proven pid or by its host's stop_command. */
  private canStop(rec: LaunchRecord): boolean {
    return rec.replica.placement?.pid != null || rec.stopArgv !== undefined;
  }

  drainStatus(rec: LaunchRecord): DrainStatus {
    const r = rec.replica;
    return { name: r.name, state: r.removed ? 'stopped' : r.state, outstanding: r.outstanding, drain_deadline: rec.drainDeadline ?? null };
  }

  /** Cordon or uncordon any replica (static included): out of rotation, pins released, nothing stopped. */
  setDraining(name: string, draining: boolean): Replica {
    const r = this.registry.get(name);
    if (r === undefined) throw new DomainError('unknown_replica', `no replica named '${name}'`);
    const rec = this.records.get(name);
    if (!draining && (r.stopping || rec?.drain !== undefined)) {
      throw new DomainError('replica_not_routable', `replica '${name}' is being removed; it cannot be put back into rotation`);
    }
    if (draining && !r.draining) {
      r.draining = true;
      this.routing.releasePins(r);
      this.log.info({ event: 'drain', replica: name, cordon: true }, `replica ${name} taken out of rotation`);
    } else if (!draining && r.draining) {
      r.draining = false;
      this.log.info({ event: 'undrain', replica: name }, `replica ${name} back in rotation`);
    }
    return r;
  }

  /** Shutdown: drain and stop every launched replica, bounded by `deadline`. */
  async stopAll(deadline: number): Promise<void> {
    await Promise.all(
      [...this.records.values()].map((rec) => {
        rec.drain ??= this.drainAndStop(rec, deadline);
        return rec.drain;
      }),
    );
  }

  private async drainAndStop(rec: LaunchRecord, deadline: number): Promise<void> {
    const r = rec.replica;
    r.draining = true;
    this.routing.releasePins(r);
    rec.drainDeadline = new Date(Date.now() + Math.max(0, deadline - performance.now())).toISOString();
    this.log.info({ event: 'drain', replica: r.name, outstanding: r.outstanding, drain_deadline: rec.drainDeadline }, `draining ${r.name}`);
    while (r.outstanding > 0 && performance.now() < deadline) await delay(Math.min(50, Math.max(1, deadline - performance.now())));
    if (r.outstanding > 0) {
      this.log.warn({ event: 'drain_timeout', replica: r.name, outstanding: r.outstanding }, `drain of ${r.name} timed out; cutting ${r.outstanding} requests`);
      for (const x of [...r.inflight]) x.abort(`replica ${r.name} was removed and its drain timed out`);
    }
    await this.stop(rec);
  }

  /** Stop the process once (concurrent calls share it), then free the slot when it stops answering. */
  private stop(rec: LaunchRecord): Promise<void> {
    rec.stopped ??= (async () => {
      const r = rec.replica;
      rec.stopRequested = true;
      r.stopping = true;
      r.draining = true;
      this.routing.releasePins(r);
      const pid = r.placement?.pid ?? null;
      if (!this.canStop(rec)) {
        // Adopted without a proven pid (a pypto-serving-router state file, a dead or reused pid)
        // and no stop_command: a process whose identity was not proven is never signalled. It
        // keeps running, so it stays in the state file and the next start adopts it again.
        rec.leftRunning = `cannot stop ${r.name}: its pid is not known (or not proven) and the host has no stop_command; it keeps running; stop it by hand`;
        if (!r.removed) this.registry.remove(r.name);
        this.log.warn({ event: 'stop_skipped', replica: r.name, host: rec.host.name, devices: rec.slot.devices }, rec.leftRunning);
        this.persist();
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
      if (answering) {
        // Still serving: freeing the slot would launch a second replica onto busy devices. It
        // stays reserved and recorded (the next start adopts it); an operator must stop it.
        rec.leftRunning = `${r.name} still answers at ${r.url} after the stop; its slot ${rec.slot.name} stays reserved and it stays in the state file; stop it by hand`;
        this.log.error({ event: 'stop_incomplete', replica: r.name, host: rec.host.name, devices: rec.slot.devices, url: r.url, pid }, rec.leftRunning);
        this.persist();
        return;
      }
      this.records.delete(r.name);
      this.slots.release(rec.slot.name, rec.holder);
      this.stats.stops++;
      this.log.info({ event: 'stop', replica: r.name, host: rec.host.name, devices: rec.slot.devices, pid }, `stopped ${r.name}; slot ${rec.slot.name} is free`);
      this.persist();
    })();
    return rec.stopped;
  }

  private async runStop(rec: LaunchRecord, spec: Parameters<LaunchRecord['transport']['stop']>[0]): Promise<void> {
    try {
      await rec.transport.stop(spec);
    } catch (e) {
      const r = rec.replica;
      this.log.error({ event: 'stop_failed', replica: r.name, err: (e as Error).message }, `stopping ${r.name} failed: ${(e as Error).message}`);
    }
  }

  /** Write the fleet part of the state file. */
  persist(): void {
    if (!this.state.enabled) return;
    const replicas: StateReplica[] = [...this.records.values()]
      .filter((rec) => !rec.stopRequested || rec.leftRunning !== undefined)
      .map((rec) => ({
        slot: rec.slot.name,
        host: rec.host.name,
        devices: rec.slot.devices,
        address: rec.replica.endpoint.host,
        port: rec.replica.endpoint.port,
        scheme: rec.replica.endpoint.scheme,
        pid: rec.replica.placement?.pid ?? null,
        launched_at: rec.replica.placement?.launchedAt ?? null,
        model: rec.replica.placement?.model ?? null,
      }));
    this.state.saveFleet(replicas);
  }

  /** Whether `pid` is provably the process serving `port` on the slot's host (the transport checks). */
  identify(slot: SlotSpec, pid: number, port: number): Promise<PidIdentity> {
    return this.launchers.forHost(this.hostOf(slot)).identify(pid, port);
  }

  /** Register an adopted replica (adoption module decides who qualifies); `pid` null when unproven. */
  registerAdopted(slot: SlotSpec, entry: StateReplica, ready: boolean, pid: number | null): Replica | undefined {
    const host = this.hostOf(slot);
    const holder = `adopt#${++this.seq}`;
    if (!this.slots.reserve(slot.name, holder)) return undefined;
    const transport = this.launchers.forHost(host);
    const replica = new Replica(slot.name, 'adopted', createEndpoint({ scheme: entry.scheme, host: entry.address, port: entry.port }), {
      slot: slot.name,
      host: host.name,
      devices: slot.devices,
      pid,
      logPath: posix.join(host.logDir, `${slot.name}.log`),
      launchedAt: entry.launched_at ?? new Date().toISOString(),
      ...(entry.model !== null ? { model: entry.model } : {}),
    }, ready, host.maxInflight);
    const env = transport.kind === 'local' ? buildLaunchEnv(host, slot, this.env) : buildLaunchEnv(host, slot, {});
    const rec = new LaunchRecord(replica, host, slot, transport, buildStopArgv(host, slot), env, holder);
    this.registry.add(replica);
    this.records.set(replica.name, rec);
    this.stats.adoptions++;
    return replica;
  }

  /** Fleet changes happen on the leader only (issue 8); a follower answers 409 with its address. */
  assertLeader(): void {
    if (this.leader.isLeader) return;
    const url = this.leader.leaderUrl;
    throw new DomainError('not_leader', `this router does not lead the fleet; send fleet changes to the leader${url ? ` at ${url}` : ''}`, { leader: url ?? null });
  }

  /**
   * Leadership lost: forget the replicas without stopping them (the new leader adopts them; this
   * router mirrors them back as `shared`).
   */
  relinquish(): void {
    for (const rec of [...this.records.values()]) {
      if (rec.drain !== undefined || rec.stopped !== undefined) continue;
      this.records.delete(rec.name);
      this.slots.release(rec.slot.name, rec.holder);
      if (!rec.replica.removed) this.registry.remove(rec.name);
    }
  }

  hostOf(slot: SlotSpec): HostSpec {
    const h = this.config.hosts.find((x) => x.name === slot.host);
    if (h === undefined) throw new Error(`slot ${slot.name} names unknown host ${slot.host}`);
    return h;
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
