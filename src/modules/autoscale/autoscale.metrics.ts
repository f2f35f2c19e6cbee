import { Injectable } from '@nestjs/common';
import { Counter, Gauge, type Registry } from 'prom-client';
import { METRIC_PREFIX, MetricsRegistry } from '../../common/metrics/metrics-registry.js';
import { AutoscalerService } from './autoscaler.service.js';

/**
 * The autoscaler's metrics (contract §6.1): its decisions by direction and reason (one per pool per
 * tick, plus `up`/`launch_failed` for each failed launch), each pool's current and desired size, and
 * whether it is paused. Absent when no `autoscale` section is configured. Read at each scrape.
 */
function registerAutoscaleMetrics(reg: Registry, P: string, autoscaler: AutoscalerService): void {
  if (!autoscaler.enabled) return;
  const seen = new Map<string, number>();
  new Counter({
    name: `${P}autoscale_decisions_total`,
    help: 'Autoscaler decisions by direction (up, down, hold) and reason, one per model pool per tick; up/launch_failed counts failed launches.',
    labelNames: ['direction', 'reason'],
    registers: [reg],
    collect() {
      for (const [key, n] of autoscaler.counts) {
        const [direction, reason] = key.split('|');
        const d = n - (seen.get(key) ?? 0);
        if (d > 0) this.inc({ direction, reason }, d);
        seen.set(key, n);
      }
    },
  });
  new Gauge({
    name: `${P}autoscale_pool_size`,
    help: "Each model pool's size as the autoscaler saw it at its last tick (kind=current) and the size it aims for (kind=desired).",
    labelNames: ['pool', 'kind'],
    registers: [reg],
    collect() {
      for (const s of autoscaler.pools) {
        if (s.last === undefined) continue;
        this.set({ pool: s.pool.model, kind: 'current' }, s.last.current);
        this.set({ pool: s.pool.model, kind: 'desired' }, s.last.desired);
      }
    },
  });
  new Gauge({
    name: `${P}autoscale_paused`,
    help: '1 while the autoscaler is paused (PATCH /fleet/autoscaler).',
    registers: [reg],
    collect() {
      this.set(autoscaler.paused ? 1 : 0);
    },
  });
}

/** The autoscale module's collector. */
@Injectable()
export class AutoscaleMetrics {
  constructor(metrics: MetricsRegistry, autoscaler: AutoscalerService) {
    registerAutoscaleMetrics(metrics.registry, METRIC_PREFIX, autoscaler);
  }
}
