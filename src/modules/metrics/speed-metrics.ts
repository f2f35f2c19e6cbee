import { Gauge, type Registry } from 'prom-client';
import type { RegistryService } from '../registry/registry.service.js';
import type { RoutingService } from '../routing/routing.service.js';

/**
 * Speed-aware load (contract §4.2): each replica's estimated seconds per request and its slowness
 * relative to the fleet median, as the last routing decision saw them (a scrape reads, never
 * refreshes). Absent with `routing.speed_aware` off.
 */
export function registerSpeedMetrics(reg: Registry, P: string, registry: RegistryService, routing: RoutingService): void {
  new Gauge({
    name: `${P}replica_request_seconds`,
    help: 'Estimated seconds in flight per request on the replica (median of its last 16 answers), as of the last routing decision (speed-aware load); replicas with fewer than 8 answers are left out.',
    labelNames: ['replica'],
    registers: [reg],
    collect() {
      this.reset();
      if (routing.speeds === undefined) return;
      for (const r of registry.list) if (r.requestSeconds !== null) this.set({ replica: r.name }, r.requestSeconds);
    },
  });
  new Gauge({
    name: `${P}replica_slowness`,
    help: 'Seconds per request over the fleet median (1: within 1.5x or 50 ms of it); load comparisons weigh in-flight counts by it.',
    labelNames: ['replica'],
    registers: [reg],
    collect() {
      this.reset();
      if (routing.speeds === undefined) return;
      for (const r of registry.list) this.set({ replica: r.name }, r.slowness);
    },
  });
}
