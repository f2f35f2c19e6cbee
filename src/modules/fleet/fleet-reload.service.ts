import { Inject, Injectable } from '@nestjs/common';
import type { ReloadPlan } from '../../config/config-reload.js';
import { RouterConfig, type StaticReplicaSpec } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { LeaderService } from '../cluster/leader.service.js';
import { RegistryService } from '../registry/registry.service.js';
import { staticReplica } from '../registry/static-replicas.loader.js';
import { RoutingService } from '../routing/routing.service.js';
import { FleetBook } from './fleet-book.service.js';
import { drainedOrCut, FleetService } from './fleet.service.js';

/** What a reload did to the fleet, for the answer and the audit line. */
export interface FleetReloadReport {
  readonly replicasAdded: readonly string[];
  readonly replicasRemoved: readonly string[];
  readonly slotsAdded: readonly string[];
  readonly slotsRemoved: readonly string[];
  /** Launched replicas in removed slots that are now draining, to be stopped (leader only). */
  readonly stopping: readonly string[];
  /** Launched replicas in removed slots this router may not stop (a follower, or no proven pid). */
  readonly leftRunning: readonly string[];
}

/**
 * The fleet's side of a config reload (docs/reload.md), after RouterConfig.update took the new
 * file: static replicas new in the file join unready and are routable once their probes pass;
 * static replicas gone from it leave rotation at once (pins released), finish their in-flight
 * requests or are cut at the drain timeout, and are forgotten: never stopped. The slot table
 * takes the new hosts' slots; a launched replica in a slot that left is drained and stopped by
 * the leader (every router applies the rest).
 */
@Injectable()
export class FleetReload {
  constructor(
    private readonly config: RouterConfig,
    private readonly book: FleetBook,
    private readonly fleet: FleetService,
    private readonly registry: RegistryService,
    private readonly routing: RoutingService,
    private readonly leader: LeaderService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  /** Applies `plan`'s fleet part; the drains it starts run on after it returns. */
  apply(plan: ReloadPlan): FleetReloadReport {
    const added: string[] = [];
    for (const spec of plan.addedReplicas) if (this.add(spec)) added.push(spec.name);
    const failed = (name: string) => (e: unknown) => this.log.error({ err: e, replica: name }, `retiring static replica ${name} failed`);
    for (const name of plan.removedReplicas) this.retire(name).catch(failed(name));
    // A changed entry: the old one drains as if removed, the new one joins once it is gone.
    for (const spec of plan.replacedReplicas)
      this.retire(spec.name)
        .then(() => this.add(spec))
        .catch(failed(spec.name));
    const stopping: string[] = [];
    const leftRunning: string[] = [];
    this.book.slots.redeclare(this.config.slots, this.config.maxReplicas);
    for (const slot of plan.removedSlots) {
      if (this.book.records.get(slot) === undefined) continue;
      if (this.leader.isLeader && this.fleet.canRemove(slot)) {
        this.fleet.remove(slot).done.catch((e: unknown) => this.log.error({ err: e, replica: slot }, `stopping ${slot} after its slot left the config failed`));
        stopping.push(slot);
      } else leftRunning.push(slot);
    }
    if (leftRunning.length > 0) {
      this.log.warn(
        { event: 'config_reload_left_running', replicas: leftRunning, leader: this.leader.isLeader },
        `slots of ${leftRunning.join(', ')} left the config but ${this.leader.isLeader ? 'the router cannot stop them (no proven pid, no stop_command)' : 'only the leader stops replicas'}`,
      );
    }
    return {
      replicasAdded: added,
      replicasRemoved: [...plan.removedReplicas, ...plan.replacedReplicas.map((s) => s.name)],
      slotsAdded: plan.addedSlots,
      slotsRemoved: plan.removedSlots,
      stopping,
      leftRunning,
    };
  }

  private add(spec: StaticReplicaSpec): boolean {
    if (this.registry.get(spec.name) !== undefined) {
      this.log.warn({ event: 'config_reload_name_taken', replica: spec.name }, `static replica ${spec.name} not added: a replica of that name is registered`);
      return false;
    }
    this.registry.add(staticReplica(spec, false));
    this.log.info(
      { event: 'replica_added', replica: spec.name, url: `${spec.scheme}://${spec.host}:${spec.port}` },
      `static replica ${spec.name} added; routable once healthy`,
    );
    return true;
  }

  private async retire(name: string): Promise<void> {
    const r = this.registry.get(name);
    if (r === undefined || r.kind !== 'static') return;
    r.drain(true);
    this.routing.releasePins(r);
    this.log.info(
      { event: 'drain', replica: name, outstanding: r.outstanding, reason: 'config_reload' },
      `static replica ${name} left the config: draining (never stopped)`,
    );
    await drainedOrCut(r, performance.now() + this.config.drainTimeoutMs, this.log, 'left the config');
    if (this.registry.get(name) === r) this.registry.remove(name);
    this.log.info({ event: 'replica_removed', replica: name, reason: 'config_reload' }, `static replica ${name} removed`);
  }
}
