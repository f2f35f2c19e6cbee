import { Counter, Gauge, type Registry } from 'prom-client';
import type { AffinityService } from '../affinity/affinity.service.js';

/**
 * Prefix affinity (contract §4.1): how many blocks the index holds (its memory bound is
 * `routing.prefix_blocks`) and drops. How much of each prompt it matched is observed by routing
 * (RoutingMetrics); the decisions themselves are the `decision="prefix"` label of
 * `affinity_router_requests_total`.
 */
export function registerPrefixMetrics(reg: Registry, prefix: string, affinity: AffinityService): void {
  new Gauge({
    name: `${prefix}prefix_index_blocks`,
    help: "Prompt-prefix blocks held by the prefix index (released replicas' entries included until dropped); capped by routing.prefix_blocks.",
    registers: [reg],
    collect() {
      this.set(affinity.prefixes?.size ?? 0);
    },
  });
  let evicted = 0;
  new Counter({
    name: `${prefix}prefix_index_evictions_total`,
    help: 'Prefix index entries dropped to stay within routing.prefix_blocks.',
    registers: [reg],
    collect() {
      const now = affinity.prefixes?.evicted ?? 0;
      if (now > evicted) this.inc(now - evicted);
      evicted = now;
    },
  });
}
