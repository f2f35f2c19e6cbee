import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { AffinityService } from '../affinity/affinity.service.js';
import type { RoutingService } from '../routing/routing.service.js';

/** Blocks of 256 characters: 0 is no match, 64 is 16 KiB of shared prompt. */
const MATCH_BUCKETS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 8192];

/**
 * Prefix affinity (contract §4.1): how much of each session-less prompt the index matched, and how many
 * blocks the index holds (its memory bound is `routing.prefix_blocks`). The decisions themselves are
 * the `decision="prefix"` label of `affinity_router_requests_total`.
 */
export function registerPrefixMetrics(reg: Registry, prefix: string, affinity: AffinityService, routing: RoutingService): void {
  const matched = new Histogram({
    name: `${prefix}prefix_match_blocks`,
    help: 'Session-less requests with a prompt: blocks of its prefix the index matched at routing (0: no match), whether or not load let it be kept.',
    buckets: MATCH_BUCKETS,
    registers: [reg],
  });
  routing.onPrefixRouted((blocks) => matched.observe(blocks));
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
