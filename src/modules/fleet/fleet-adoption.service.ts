import { Inject, Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { probe } from '../health/probe.js';
import { fetchModelList } from '../health/model-list.js';
import { createEndpoint, destroyEndpoint } from '../registry/replica-endpoint.js';
import { RegistryService } from '../registry/registry.service.js';
import { RoutingService } from '../routing/routing.service.js';
import { FleetService } from './fleet.service.js';
import { FOREIGN } from './slot-table.js';
import { traced } from '../../common/tracing/tracing.js';
import type { FleetState, StateReplica } from '../state/state-file.js';

/**
 * Adoption after a restart (contract §6): probe every recorded replica; adopt the ones that answer
 * `/health` and serve the expected model (keeping a pid only once proven), keep the slot of one
 * that answers for another model, report silent ones as orphans; then restore the recorded pins
 * of the adopted replicas.
 */
@Injectable()
export class FleetAdoption {
  constructor(
    private readonly config: RouterConfig,
    private readonly fleet: FleetService,
    private readonly registry: RegistryService,
    private readonly routing: RoutingService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  /** Probe every recorded replica; adopt the ones that answer as expected (contract §6). */
  adopt(state: FleetState): Promise<void> {
    return traced('fleet.adoption', { 'affinity_router.recorded': state.replicas.length }, () => this.adoptAll(state));
  }

  private async adoptAll(state: FleetState): Promise<void> {
    const adopted = new Set<string>();
    // Probe in parallel, register in the recorded order (a stable replica table).
    const steps = await Promise.all(state.replicas.map((entry) => this.adoptOne(entry)));
    steps.forEach((step, i) => {
      if (step() === 'adopted') adopted.add(state.replicas[i].slot);
    });
    const dir = this.routing;
    let pins = 0;
    for (const p of state.sessions) {
      const r = adopted.has(p.replica) ? this.registry.get(p.replica) : undefined;
      if (r !== undefined) {
        dir.pin(p.id, r);
        pins++;
      }
    }
    this.log.info(
      { event: 'adoption_done', adopted: [...adopted], orphans: this.fleet.orphans.length, pins },
      `adopted ${adopted.size} of ${state.replicas.length} recorded replicas`,
    );
  }

  /**
   * A new leader's reconciliation (issue 26): probe every declared slot nobody holds yet, adopt a
   * server that answers there as the slot's replica (its pid, taken from `known` entries, proven as
   * above), keep the slot of one that answers for another model, and leave silent slots free. So a
   * leader whose records were lost (Redis back empty) still adopts what runs and never launches onto
   * an occupied port.
   */
  async reconcile(known: readonly StateReplica[]): Promise<void> {
    const bySlot = new Map(known.map((e) => [e.slot, e]));
    const open = this.fleet.slots.slots.filter((s) => this.fleet.slots.holder(s.name) === undefined);
    const steps = await Promise.all(
      open.map((slot) => {
        const host = this.config.hosts.find((h) => h.name === slot.host);
        const entry = bySlot.get(slot.name) ?? {
          slot: slot.name,
          host: slot.host,
          devices: slot.devices,
          address: slot.address,
          port: slot.port,
          scheme: 'http' as const,
          pid: null,
          launched_at: null,
          model: host?.servedModelName ?? host?.model ?? null,
        };
        return this.adoptOne(entry, true);
      }),
    );
    const found = steps.map((step) => step()).filter((o) => o === 'adopted' || o === 'kept').length;
    if (found > 0) this.log.info({ event: 'reconciled', found }, `reconciliation found ${found} running servers in slots with no record`);
  }

  /**
   * Probe a recorded replica now; the returned step registers the outcome (run in order). With
   * `quiet` (reconciliation), a slot where nothing answers is simply free, not an orphan.
   */
  private async adoptOne(entry: StateReplica, quiet = false): Promise<() => 'adopted' | 'kept' | 'orphan' | 'skipped' | 'free'> {
    const slot = this.fleet.slots.get(entry.slot);
    const where = { slot: entry.slot, host: entry.host, devices: entry.devices, address: entry.address, port: entry.port, pid: entry.pid };
    if (slot === undefined || slot.host !== entry.host) {
      return () => {
        this.orphan({ ...where, reason: `slot ${entry.slot} is no longer declared in the config; not adopting` });
        return 'skipped';
      };
    }
    const ep = createEndpoint({ scheme: entry.scheme, host: entry.address, port: entry.port });
    let h: Awaited<ReturnType<typeof probe>>;
    let modelOk = true;
    const expected = entry.model ?? this.expectedModel(slot.host);
    try {
      h = await probe(ep, this.config.health.path, this.config.health.timeoutMs);
      if (h.ok && expected !== undefined) {
        const m = await fetchModelList(ep, this.config.health.timeoutMs, this.config.modelsMaxBytes);
        modelOk = m.ok && m.entries.some((e) => e.id === expected);
      }
    } finally {
      destroyEndpoint(ep);
    }
    // A recorded pid is kept only once proven to be the process serving the port: a stop signals
    // its whole process group, and after a crash the pid may be dead or reused (contract §6).
    const identity = h.status !== undefined && modelOk && entry.pid !== null ? await this.fleet.identify(slot, entry.pid, entry.port) : undefined;
    return () => {
      if (h.status === undefined && quiet) return 'free';
      if (h.status === undefined) {
        this.orphan({
          ...where,
          reason: `does not answer at ${ep.url} (${h.error ?? 'no answer'}); if a process still holds devices [${entry.devices.join(',')}] on ${entry.host}, stop it by hand`,
        });
        return 'orphan';
      }
      if (!modelOk) {
        this.orphan({ ...where, reason: `answers at ${ep.url} but does not serve model ${expected}; slot kept reserved, not adopted` });
        this.fleet.slots.reserve(slot.name, `${FOREIGN}${slot.name}`);
        return 'kept';
      }
      const pid = identity?.proven === true ? entry.pid : null;
      const r = this.fleet.registerAdopted(slot, entry, h.ok, pid);
      if (r === undefined) return 'skipped';
      if (identity !== undefined && !identity.proven) {
        const stop = this.fleet.record(r.name)?.stopArgv !== undefined ? "its host's stop_command stops it" : 'stop it by hand (the host has no stop_command)';
        this.log.warn(
          { event: 'adopt_pid_unproven', replica: r.name, recorded_pid: entry.pid, reason: identity.reason },
          `adopting ${r.name} without its recorded pid ${entry.pid}: ${identity.reason}; the router will never signal that pid, ${stop}`,
        );
      }
      if (!h.ok) {
        this.fleet.reportOrphan({ ...where, reason: `answers ${h.status} at ${ep.url}: slot kept reserved, adopted as unready until its health checks pass` });
        this.log.warn(
          { event: 'adopt', replica: r.name, ready: false, status: h.status, pid },
          `adopted ${r.name} but it answers ${h.status}; it stays out of rotation until healthy`,
        );
      } else {
        this.log.info({ event: 'adopt', replica: r.name, pid, url: r.url }, `adopted ${r.name} (pid ${pid ?? 'unknown'}) without relaunching`);
      }
      return 'adopted';
    };
  }

  private orphan(o: FleetService['orphans'][number]): void {
    this.fleet.reportOrphan(o);
    this.log.warn({ event: 'orphan', ...o }, `recorded replica ${o.slot}: ${o.reason}`);
  }

  private expectedModel(hostName: string): string | undefined {
    const h = this.config.hosts.find((x) => x.name === hostName);
    return h?.servedModelName ?? h?.model;
  }
}
