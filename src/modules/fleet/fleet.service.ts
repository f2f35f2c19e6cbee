import { Inject, Injectable } from '@nestjs/common';
import { posix } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { RouterConfig, type HostSpec, type SlotSpec } from '../../config/router-config.js';
import { DomainError } from '../../common/errors/domain-error.js';
import { traced } from '../../common/tracing/tracing.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import type { PidIdentity } from '../launcher/launcher.transport.js';
import type { Replica } from '../registry/replica.js';
import { RegistryService } from '../registry/registry.service.js';
import { RoutingService } from '../routing/routing.service.js';
import { LeaderService } from '../cluster/leader.service.js';
import { FleetBook } from './fleet-book.service.js';
import type { LaunchRecord } from './launch-record.js';
import { recordedReplica } from './recorded-replica.js';
import { ReplicaLauncher } from './replica-launcher.service.js';
import { ReplicaStopper } from './replica-stopper.service.js';
import type { Capacity, SlotTable } from './slot-table.js';
import type { StateReplica } from '../state/state-file.js';
import type { DrainStatus, FailureReport, OrphanReport } from './fleet-reports.js';

export type { DrainStatus, FailureReport, OrphanReport };

/**
 * The control plane (contract §6) as the admin API, metrics and start-up see it: places replicas into
 * device slots (ReplicaLauncher), drains them here, stops them (ReplicaStopper), registers adopted
 * survivors. Promotes nothing itself: health does. The books are FleetBook's.
 */
@Injectable()
export class FleetService {
  constructor(
    private readonly config: RouterConfig,
    private readonly book: FleetBook,
    private readonly launcher: ReplicaLauncher,
    private readonly stopper: ReplicaStopper,
    private readonly registry: RegistryService,
    private readonly routing: RoutingService,
    private readonly leader: LeaderService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  get slots(): SlotTable {
    return this.book.slots;
  }

  get orphans(): readonly OrphanReport[] {
    return this.book.orphans;
  }

  get failures(): readonly FailureReport[] {
    return this.book.failures;
  }

  get stats(): Readonly<FleetBook['stats']> {
    return this.book.stats;
  }

  capacity(): Capacity {
    return this.book.slots.capacity();
  }

  record(name: string): LaunchRecord | undefined {
    return this.book.records.get(name);
  }

  get launchedCount(): number {
    return this.book.records.size;
  }

  /** Launch `count` replicas (optionally on one host, or on hosts serving `model`); all slots or none (409 with the capacity). */
  launch(count = 1, hostName?: string, model?: string): Promise<Replica[]> {
    this.assertLeader();
    return traced('fleet.launch', { 'affinity_router.count': count, 'affinity_router.host': hostName ?? '', 'affinity_router.model': model ?? '' }, () =>
      this.launcher.launch(count, hostName, model),
    );
  }

  /** Launch-timeout and liveness job. */
  checkLaunching(): Promise<void> {
    return this.launcher.checkLaunching();
  }

  /** Drain then stop a launched replica (contract §6). A second call joins the first drain. */
  remove(name: string): { rec: LaunchRecord; done: Promise<void> } {
    const r = this.registry.get(name);
    if (r?.kind === 'shared') this.assertLeader();
    const rec = this.book.records.get(name);
    if (r === undefined && rec === undefined) throw new DomainError('unknown_replica', `no replica named '${name}'`);
    if (rec === undefined) throw new DomainError('not_launched', `replica '${name}' was not launched by this router`, { capacity: this.capacity() });
    if (rec.drain === undefined && !this.stopper.canStop(rec)) {
      throw new DomainError(
        'not_stoppable',
        `the router cannot stop '${name}': it was adopted without a proven pid and host '${rec.host.name}' has no stop_command; ` +
          'take it out of rotation with PATCH {"draining": true} and stop it by hand',
        { capacity: this.capacity() },
      );
    }
    rec.drain ??= traced('fleet.drain', { 'affinity_router.replica': name }, () => this.drainAndStop(rec, performance.now() + this.config.drainTimeoutMs));
    return { rec, done: rec.drain };
  }

  /** Whether `remove(name)` would accept it: launched or adopted, and stoppable (a proven pid or a stop_command). */
  canRemove(name: string): boolean {
    const rec = this.book.records.get(name);
    return rec !== undefined && (rec.drain !== undefined || this.stopper.canStop(rec));
  }

  drainStatus(rec: LaunchRecord): DrainStatus {
    const r = rec.replica;
    return { name: r.name, state: r.removed ? 'stopped' : r.state, outstanding: r.outstanding, drain_deadline: rec.drainDeadline ?? null };
  }

  /** Cordon or uncordon any replica (static included): out of rotation, pins released, nothing stopped. */
  setDraining(name: string, draining: boolean): Replica {
    const r = this.registry.get(name);
    if (r === undefined) throw new DomainError('unknown_replica', `no replica named '${name}'`);
    const rec = this.book.records.get(name);
    if (!draining && (r.stopping || rec?.drain !== undefined)) {
      throw new DomainError('replica_not_routable', `replica '${name}' is being removed; it cannot be put back into rotation`);
    }
    if (draining && !r.draining) {
      r.drain(true);
      this.routing.releasePins(r);
      this.log.info({ event: 'drain', replica: name, cordon: true }, `replica ${name} taken out of rotation`);
    } else if (!draining && r.draining) {
      r.drain(false);
      this.log.info({ event: 'undrain', replica: name }, `replica ${name} back in rotation`);
    }
    return r;
  }

  /** Shutdown: drain and stop every launched replica, bounded by `deadline`. */
  async stopAll(deadline: number): Promise<void> {
    await Promise.all(
      [...this.book.records.values()].map((rec) => {
        rec.drain ??= this.drainAndStop(rec, deadline);
        return rec.drain;
      }),
    );
  }

  /** Out of rotation at once, pins released; stop once its last request ended or at `deadline`. */
  private async drainAndStop(rec: LaunchRecord, deadline: number): Promise<void> {
    const r = rec.replica;
    r.drain(true);
    this.routing.releasePins(r);
    rec.drainDeadline = new Date(Date.now() + Math.max(0, deadline - performance.now())).toISOString();
    this.log.info({ event: 'drain', replica: r.name, outstanding: r.outstanding, drain_deadline: rec.drainDeadline }, `draining ${r.name}`);
    await drainedOrCut(r, deadline, this.log, 'was removed');
    // A drain that began while the process was being spawned (a shutdown during a scale-up) stops
    // it once its pid is known; a launch that failed has already freed its slot.
    await rec.spawning?.catch(() => undefined);
    if (this.book.records.get(rec.name) !== rec) return;
    await this.stopper.stop(rec);
  }

  /** Write the fleet part of the state file. */
  persist(): void {
    this.book.persist();
  }

  reportOrphan(o: OrphanReport): void {
    this.book.reportOrphan(o);
  }

  /** Whether `pid` is provably the process serving `port` on the slot's host (the transport checks). */
  identify(slot: SlotSpec, pid: number, port: number): Promise<PidIdentity> {
    return this.launcher.identify(slot, pid, port);
  }

  /**
   * Register an adopted replica (adoption decides who qualifies); `pid` null when unproven. A
   * `shared` replica this router already routes to on the same address is taken over in place
   * (issue 26): it keeps its health, in-flight requests and pins.
   */
  registerAdopted(slot: SlotSpec, entry: StateReplica, ready: boolean, pid: number | null): Replica | undefined {
    const host = this.hostOf(slot);
    const present = this.registry.get(entry.slot);
    const inPlace = present?.kind === 'shared' && present.endpoint.host === entry.address && present.endpoint.port === entry.port;
    if (present !== undefined && !inPlace) {
      if (present.kind !== 'shared') return undefined;
      this.registry.remove(present.name);
    }
    const holder = this.book.holder('adopt');
    if (!this.book.slots.reserve(slot.name, holder)) return undefined;
    const logPath = posix.join(host.logDir, `${slot.name}.log`);
    const where = { host: host.name, devices: slot.devices, pid, logPath };
    let replica: Replica;
    if (inPlace) {
      replica = present;
      replica.changeHands('adopted', recordedReplica(entry, 'adopted', where, { ready, maxInflight: host.maxInflight }).placement);
    } else {
      replica = recordedReplica(entry, 'adopted', where, { ready, maxInflight: host.maxInflight, engineMetrics: host.engineMetrics });
    }
    this.launcher.recordFor(replica, host, slot, holder, !inPlace);
    this.book.stats.adoptions++;
    return replica;
  }

  /** The `shared` replicas in the table as fleet-state entries: a follower's last view of the fleet. */
  sharedEntries(): StateReplica[] {
    return this.registry.list
      .filter((r) => r.kind === 'shared' && r.placement !== null)
      .map((r) => {
        const p = r.placement!;
        return {
          slot: p.slot,
          host: p.host,
          devices: [...p.devices],
          address: r.endpoint.host,
          port: r.endpoint.port,
          scheme: r.endpoint.scheme,
          pid: p.pid,
          launched_at: p.launchedAt,
          model: p.model ?? null,
        };
      });
  }

  /** Drop the `shared` replicas adoption did not take over (they did not answer as expected). */
  dropShared(): void {
    for (const r of [...this.registry.list]) if (r.kind === 'shared') this.registry.remove(r.name);
  }

  /** Fleet changes happen on the leader only (issue 8); a follower answers 409 with its address. */
  assertLeader(): void {
    if (this.leader.isLeader) return;
    const url = this.leader.leaderUrl;
    throw new DomainError('not_leader', `this router does not lead the fleet; send fleet changes to the leader${url ? ` at ${url}` : ''}`, {
      leader: url ?? null,
    });
  }

  /**
   * Leadership lost: stop owning the replicas without stopping them, and keep routing to them as
   * `shared` (issue 26): the table, their health and their pins stay, so no request fails while
   * the new leader adopts them; the mirror follows what that leader publishes.
   */
  relinquish(): void {
    for (const rec of [...this.book.records.values()]) {
      if (rec.drain !== undefined || rec.stopped !== undefined) continue;
      this.book.records.delete(rec.name);
      this.book.slots.release(rec.slot.name, rec.holder);
      if (!rec.replica.removed) rec.replica.changeHands('shared');
    }
  }

  hostOf(slot: SlotSpec): HostSpec {
    return this.launcher.hostOf(slot);
  }
}

/**
 * Resolves when every replica of `replicas` has no request of this router in flight (each one's
 * `whenIdle()`, an event from the proxy), or at `deadline` (performance.now() ms), whichever first.
 */
/**
 * Waits for a draining replica's last request (untilIdleOr); at `deadline`, logs the timeout and
 * cuts what is left, each with `replica <name> <why> and its drain timed out`.
 */
export async function drainedOrCut(r: Replica, deadline: number, log: AppLogger, why: string): Promise<void> {
  await untilIdleOr(deadline, [r]);
  if (r.outstanding === 0) return;
  log.warn({ event: 'drain_timeout', replica: r.name, outstanding: r.outstanding }, `drain of ${r.name} timed out; cutting ${r.outstanding} requests`);
  for (const x of [...r.inflight]) x.abort(`replica ${r.name} ${why} and its drain timed out`);
}

export async function untilIdleOr(deadline: number, replicas: readonly Replica[]): Promise<void> {
  const stop = new AbortController();
  const timeout = sleep(Math.max(0, deadline - performance.now()), undefined, { signal: stop.signal }).catch(() => undefined);
  try {
    await Promise.race([Promise.all(replicas.map((r) => r.whenIdle())), timeout]);
  } finally {
    stop.abort();
  }
}
