import { Injectable } from '@nestjs/common';
import { Counter, Histogram } from 'prom-client';
import { METRIC_PREFIX, MetricsRegistry } from '../../common/metrics/metrics-registry.js';
import type { Replica } from '../registry/replica.js';

/** The health module's collector: every active probe, observed as it ends. */
@Injectable()
export class HealthMetrics {
  private readonly checks: Counter<'replica' | 'result'>;
  private readonly latency: Histogram<'replica'>;

  constructor(metrics: MetricsRegistry) {
    const reg = metrics.registry;
    this.checks = new Counter({
      name: `${METRIC_PREFIX}health_checks_total`,
      help: 'Active health probes by result.',
      labelNames: ['replica', 'result'],
      registers: [reg],
    });
    this.latency = new Histogram({
      name: `${METRIC_PREFIX}health_check_duration_seconds`,
      help: 'Active health probe latency.',
      labelNames: ['replica'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5],
      registers: [reg],
    });
  }

  probed(r: Replica, ok: boolean, ms: number): void {
    this.checks.inc({ replica: r.name, result: ok ? 'ok' : 'fail' });
    this.latency.observe({ replica: r.name }, ms / 1000);
  }
}
