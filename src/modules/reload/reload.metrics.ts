import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { METRIC_PREFIX, MetricsRegistry } from '../../common/metrics/metrics-registry.js';

/** Results a reload is counted by: `applied`, or `invalid` (the new config was refused, nothing changed). */
export type ReloadResultLabel = 'applied' | 'invalid';

/** The reload module's collector: every reload by result, and the hash of the config in effect. */
@Injectable()
export class ReloadMetrics {
  private readonly reloads: Counter<'result'>;
  private readonly info: Gauge<'hash'>;
  private hash: string | undefined;

  constructor(metrics: MetricsRegistry) {
    const reg = metrics.registry;
    this.reloads = new Counter({
      name: `${METRIC_PREFIX}config_reloads_total`,
      help: 'Config reloads (SIGHUP, POST /admin/reload) by result: applied, or invalid (nothing changed).',
      labelNames: ['result'],
      registers: [reg],
    });
    for (const result of ['applied', 'invalid'] as const) this.reloads.inc({ result }, 0);
    this.info = new Gauge({
      name: `${METRIC_PREFIX}config_info`,
      help: 'Always 1; `hash` is the first 12 hex digits of the SHA-256 of the config file in effect (empty without a file).',
      labelNames: ['hash'],
      registers: [reg],
    });
  }

  /** The config file in effect now has `hash` (at start, and after each applied reload). */
  inEffect(hash: string): void {
    if (this.hash !== undefined) this.info.remove({ hash: this.hash });
    this.hash = hash;
    this.info.set({ hash }, 1);
  }

  reloaded(result: ReloadResultLabel): void {
    this.reloads.inc({ result });
  }
}
