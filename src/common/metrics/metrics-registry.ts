import { Injectable, Module } from '@nestjs/common';
import { Counter, Registry } from 'prom-client';

/** Every metric's name starts with it (contract §9). */
export const METRIC_PREFIX = 'affinity_router_';

/**
 * The router's one prom-client registry, at the foot of the tree: each module registers its own
 * metrics on it (its `*.metrics.ts` collector) and `GET /metrics` serialises it.
 */
@Injectable()
export class MetricsRegistry {
  readonly registry = new Registry();
}

/** Imported by every module that registers metrics; not global, so the dependency shows. */
@Module({ providers: [MetricsRegistry], exports: [MetricsRegistry] })
export class MetricsRegistryModule {}

/** A counter whose value lives elsewhere: each scrape adds what it grew by since the last one. */
export function monotonic(reg: Registry, name: string, help: string, label: string | undefined, read: () => Record<string, number>): void {
  const last = new Map<string, number>();
  new Counter({
    name,
    help,
    labelNames: label ? [label] : [],
    registers: [reg],
    collect() {
      for (const [k, v] of Object.entries(read())) {
        const d = v - (last.get(k) ?? 0);
        if (d > 0) {
          if (label) this.inc({ [label]: k }, d);
          else this.inc(d);
        }
        last.set(k, v);
      }
    },
  });
}
