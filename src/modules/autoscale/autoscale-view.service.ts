import { Injectable } from '@nestjs/common';
import { LeaderService } from '../cluster/leader.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import type { Replica } from '../registry/replica.js';
import { RegistryService } from '../registry/registry.service.js';
import { AdmissionService } from '../routing/admission.service.js';
import type { PoolFacts } from './autoscale-pools.js';
import { FleetService } from '../fleet/fleet.service.js';

/**
 * What the autoscaler reads of the rest of the router, and nothing it changes: the replica table,
 * the fleet's records and free slots, the admission queue, and whether this router may act now
 * (the fleet leader, running). Keeps AutoscalerService to its decisions and their effects.
 */
@Injectable()
export class AutoscaleView {
  constructor(
    private readonly fleet: FleetService,
    private readonly registry: RegistryService,
    private readonly admission: AdmissionService,
    private readonly leader: LeaderService,
    private readonly lifecycle: LifecycleService,
  ) {}

  /** The leader, past start-up and not shutting down. */
  get mayAct(): boolean {
    return this.leader.isLeader && this.lifecycle.phase === 'running';
  }

  get table(): readonly Replica[] {
    return this.registry.list;
  }

  replica(name: string): Replica | undefined {
    return this.registry.get(name);
  }

  /** The fleet facts a pool sample and a scale-in choice read, as of now. */
  facts(): PoolFacts {
    const fleet = this.fleet;
    return {
      leaving: (r) => r.stopping || fleet.record(r.name)?.drain !== undefined,
      removable: (r) => fleet.canRemove(r.name),
      freeSlots: fleet.capacity().free_slots,
      hostOfSlot: (slot) => fleet.slots.get(slot)?.host,
      queued: this.admission.depth,
    };
  }
}
