import { Counter, Gauge, type Registry } from 'prom-client';
import type { RoutingService } from '../routing/routing.service.js';

/**
 * Prefix affinity (contract §4.1): how many blocks the index holds (its memory bound is
 * `routing.prefix_blocks`) and drops. How much of each prompt it matched is observed by routing
 * (RoutingMetrics); the decisions themselves are the `decision="prefix"` label of
 * `affinity_router_requests_total`.
 */
export function registerPrefixMetrics(reg: Registry, prefix: string, routing: RoutingService): void {
  new Gauge({
    name: `${prefix}prefix_index_blocks`,
    help: "Prompt-prefix blocks held by the prefix index (released replicas' entries included until dropped); capped by routing.prefix_blocks.",
    registers: [reg],
    collect() {
      this.set(routing.prefixIndex?.size ?? 0);
    },
  });
  let evicted = 0;
  new Counter({
    name: `${prefix}prefix_index_evictions_total`,
    help: 'Prefix index entries dropped to stay within routing.prefix_blocks.',
    registers: [reg],
    collect() {
      const now = routing.prefixIndex?.evicted ?? 0;
      if (now > evicted) this.inc(now - evicted);
      evicted = now;
    },
  });
}
