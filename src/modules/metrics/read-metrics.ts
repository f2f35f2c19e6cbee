import { Gauge, type Registry } from 'prom-client';
import type { RegistryService } from '../registry/registry.service.js';

/**
 * What the router could not read from a replica: its model list (model discovery) and, where
 * configured, its engine metrics. Each is said once in the log when it changes; these gauges keep
 * it visible. A replica appears once the read was tried.
 */
export function registerReadMetrics(reg: Registry, P: string, registry: RegistryService): void {
  new Gauge({
    name: `${P}replica_models_unreadable`,
    help: "1 when the replica's last GET /v1/models could not be read (error, timeout, not a model list, over --models-max-bytes), else 0.",
    labelNames: ['replica'],
    registers: [reg],
    collect() {
      this.reset();
      for (const r of registry.list) if (r.modelListOk !== null) this.set({ replica: r.name }, r.modelListOk ? 0 : 1);
    },
  });
  new Gauge({
    name: `${P}replica_engine_metrics_up`,
    help: "Replicas with engine metrics configured: 1 when the last scrape of its Prometheus endpoint was readable, 0 when not (then its load is the router's own count).",
    labelNames: ['replica'],
    registers: [reg],
    collect() {
      this.reset();
      for (const r of registry.list) if (r.health.engineMetricsOk !== null) this.set({ replica: r.name }, r.health.engineMetricsOk ? 1 : 0);
    },
  });
}
