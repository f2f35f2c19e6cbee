import { Injectable } from '@nestjs/common';
import { Gauge, type Registry } from 'prom-client';
import { METRIC_PREFIX, MetricsRegistry, monotonic } from '../../common/metrics/metrics-registry.js';
import { LeaderService } from '../cluster/leader.service.js';
import { RedisService } from '../cluster/redis.service.js';
import { FleetService } from './fleet.service.js';

/**
 * The fleet's metrics (contract §9): lifecycle events, launch capacity, orphans, and with several
 * routers the shared session store and fleet leadership. Read from their owners at each scrape.
 */
function registerFleetMetrics(reg: Registry, P: string, fleet: FleetService, redis: RedisService, leader: LeaderService): void {
  monotonic(
    reg,
    `${P}fleet_events_total`,
    'Fleet lifecycle events: launch, stop, adoption, launch_failure (the command failed), launch_timeout, exit (a launched process ended on its own).',
    'event',
    () => ({
      launch: fleet.stats.launches,
      stop: fleet.stats.stops,
      adoption: fleet.stats.adoptions,
      launch_failure: fleet.stats.launchFailures,
      launch_timeout: fleet.stats.launchTimeouts,
      exit: fleet.stats.exits,
    }),
  );
  new Gauge({
    name: `${P}fleet_capacity`,
    help: 'Launch capacity: owned slots, the ceiling, and free slots a launch may take.',
    labelNames: ['kind'],
    registers: [reg],
    collect() {
      const c = fleet.capacity();
      this.set({ kind: 'owned' }, c.owned);
      this.set({ kind: 'ceiling' }, c.ceiling);
      this.set({ kind: 'free' }, c.free_slots.length);
    },
  });
  new Gauge({
    name: `${P}orphans`,
    help: 'Recorded replicas found silent at start (see GET /fleet).',
    registers: [reg],
    collect() {
      this.set(fleet.orphans.length);
    },
  });
  new Gauge({
    name: `${P}session_store_up`,
    help: 'Shared session store (Redis): 1 reachable, 0 not (the router then routes on local state). Absent without --redis-url.',
    registers: [reg],
    collect() {
      if (redis.enabled) this.set(redis.up ? 1 : 0);
    },
  });
  new Gauge({
    name: `${P}fleet_leader`,
    help: '1 when this router leads the fleet (always 1 without Redis).',
    registers: [reg],
    collect() {
      this.set(leader.isLeader ? 1 : 0);
    },
  });
}

/** The fleet module's collector: lifecycle, capacity and leadership metrics (the autoscaler's and the state file's are their modules'). */
@Injectable()
export class FleetMetrics {
  constructor(metrics: MetricsRegistry, fleet: FleetService, redis: RedisService, leader: LeaderService) {
    registerFleetMetrics(metrics.registry, METRIC_PREFIX, fleet, redis, leader);
  }
}
