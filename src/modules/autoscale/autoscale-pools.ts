/**
 * The autoscaler's view of the fleet (contract §6.1): hosts grouped into model pools, one pool sampled
 * from the replica table, and the replica a scale-in takes. Reads only; the autoscaler acts.
 */
import type { HostSpec } from '../../config/router-config.js';
import type { Replica } from '../registry/replica.js';
import type { PoolSample } from './autoscale.policy.js';

/** The launched replicas of hosts serving one model. */
export interface Pool {
  /** `served_model_name`, else `model`, else `host:<name>` for a host with only its own `command`. */
  readonly model: string;
  readonly hosts: ReadonlySet<string>;
}

/** What the sampler needs from the fleet besides the replica table. */
export interface PoolFacts {
  /** Being drained for removal, or stopping. */
  leaving(r: Replica): boolean;
  /** Whether the fleet could stop it (launched or adopted with a proven pid, or a stop_command). */
  removable(r: Replica): boolean;
  /** Free slot names a launch may take now (honours --max-replicas). */
  readonly freeSlots: readonly string[];
  /** Slot name → host name. */
  hostOfSlot(slot: string): string | undefined;
  /** Requests waiting in the admission queue (they wait only while every routable replica is full). */
  readonly queued: number;
}

/** Hosts grouped by the model they serve, in config order. */
export function poolsOf(hosts: readonly HostSpec[]): Pool[] {
  const byModel = new Map<string, Set<string>>();
  for (const h of hosts) {
    const model = h.servedModelName ?? h.model ?? `host:${h.name}`;
    const set = byModel.get(model) ?? new Set<string>();
    set.add(h.name);
    byModel.set(model, set);
  }
  return [...byModel].map(([model, set]) => ({ model, hosts: set }));
}

/** The pool's members: launched or adopted replicas on its hosts, still in the table. */
export function members(pool: Pool, table: readonly Replica[]): Replica[] {
  return table.filter((r) => r.owned && !r.removed && r.placement !== null && pool.hosts.has(r.placement.host));
}

/** Never ready yet, and not failed or on its way out. */
export const isStarting = (r: Replica): boolean => !r.everReady && !r.failed && !r.draining && !r.stopping;

/** One pool now. Cordoned members (drained by an operator, not removed) count as gone. */
export function samplePool(pool: Pool, table: readonly Replica[], facts: PoolFacts): PoolSample {
  const all = members(pool, table);
  const leaving = all.filter((r) => facts.leaving(r));
  const current = all.filter((r) => !r.failed && !r.draining && !r.stopping);
  const routable = current.filter((r) => r.routable);
  const everyFull = routable.length > 0 && routable.every((r) => r.full);
  const load = routable.reduce((sum, r) => sum + r.load, 0) + (everyFull ? facts.queued : 0);
  return {
    routable: routable.length,
    starting: current.filter(isStarting).length,
    current: current.length,
    leaving: leaving.length,
    load,
    freeSlots: facts.freeSlots.filter((s) => pool.hosts.has(facts.hostOfSlot(s) ?? '')).length,
    removable: scaleInChoice(pool, table, facts) !== undefined,
  };
}

/**
 * The member a scale-in drains: routable (so never one still starting), removable, holding the
 * fewest live sessions; ties go to the least loaded, then to the last in the table (the newest).
 */
export function scaleInChoice(pool: Pool, table: readonly Replica[], facts: Pick<PoolFacts, 'removable'>): Replica | undefined {
  let best: Replica | undefined;
  for (const r of members(pool, table)) {
    if (!r.routable || !r.everReady || !facts.removable(r)) continue;
    if (best === undefined || r.pins < best.pins || (r.pins === best.pins && r.load <= best.load)) best = r;
  }
  return best;
}

/** The host of the first free slot of the pool, in fill order (undefined: none free). */
export function launchHost(pool: Pool, facts: Pick<PoolFacts, 'freeSlots' | 'hostOfSlot'>): string | undefined {
  for (const s of facts.freeSlots) {
    const host = facts.hostOfSlot(s);
    if (host !== undefined && pool.hosts.has(host)) return host;
  }
  return undefined;
}
