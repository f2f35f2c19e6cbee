import { Inject, Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { RegistryService } from '../registry/registry.service.js';
import type { Replica } from '../registry/replica.js';
import { HealthService } from './health.service.js';
import { fetchModelList, parseModelList, type ModelEntry } from './model-list.js';

/** Marks the request as the router's own, so a simulator does not count it as client traffic. */
const DISCOVERY_HEADERS = { 'x-router-probe': 'models' };

/** The ids of an OpenAI model list (`{"data": [{"id"}, ...]}`), or undefined when it is not one. */
export function modelIds(text: string): string[] | undefined {
  return parseModelList(text)?.map((m) => m.id);
}

/**
 * Model discovery (contract §4.3): each replica's `GET /v1/models`, read on the probe's own connection
 * (contract §3) when it becomes ready, and for every ready replica once at start and every
 * `--models-refresh` (both `refresh()`, called by HealthJobs). LoRA adapters an engine lists there are models like
 * any other. Replicas with declared `models` are never asked. A failed, malformed or over-large
 * answer (`--models-max-bytes`) keeps the list already known; the replica is then "unreadable",
 * logged once per change and in a gauge, and one whose list was never readable for `--models-grace`
 * stops being a candidate for requests that name a model. The lists kept here are what `GET
 * /v1/models` answers. The only code that changes a replica's `catalog` (a `ReplicaModels`: the
 * models it serves and its list).
 */
@Injectable()
export class ModelDiscovery {
  private readonly inFlight = new Set<Replica>();

  constructor(
    private readonly config: RouterConfig,
    private readonly registry: RegistryService,
    health: HealthService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {
    health.onTransition((r, ready) => {
      if (ready) this.start(r);
    });
  }

  /** Period of `refresh()`. */
  get refreshMs(): number {
    return this.config.modelsRefreshMs;
  }

  /** Re-read the list of every ready replica (never throws). */
  refresh(): void {
    for (const r of this.registry.list) if (r.ready) this.start(r);
  }

  private start(r: Replica): void {
    this.discover(r).catch((err: unknown) => this.log.error({ event: 'models_error', replica: r.name, err }, `model discovery of ${r.name} failed`));
  }

  /** Read one replica's list now and apply it; resolves when done (a failed read keeps the list known). */
  async discover(r: Replica): Promise<void> {
    if (r.modelsDeclared || r.removed || this.inFlight.has(r)) return;
    this.inFlight.add(r);
    try {
      const read = await fetchModelList(r.endpoint, this.config.modelsTimeoutMs, this.config.modelsMaxBytes, DISCOVERY_HEADERS);
      if (r.removed) return;
      if (read.ok) {
        this.unreadableSince.delete(r);
        if (r.modelListOk === false) this.log.info({ event: 'models_readable', replica: r.name }, `the model list of ${r.name} is readable again`);
        r.catalog.listRead(read.entries);
        return this.apply(r, read.entries);
      }
      this.unreadable(r, read.reason);
    } finally {
      this.inFlight.delete(r);
    }
  }

  /** When each replica's list became unreadable (performance.now() ms), while it is. */
  private readonly unreadableSince = new WeakMap<Replica, number>();

  private unreadable(r: Replica, why: string): void {
    const now = performance.now();
    if (r.modelListOk !== false) {
      r.catalog.listUnreadable();
      this.unreadableSince.set(r, now);
      const after =
        r.models === undefined
          ? `; after --models-grace ${this.config.modelsGraceMs / 1000} s it takes only requests naming no model`
          : '; routing by the list known before';
      this.log.warn({ event: 'models_unreadable', replica: r.name, reason: why }, `cannot read the model list of ${r.name}: ${why}${after}`);
      // Looked at again when the grace ends, whatever the refresh period.
      if (r.models === undefined) setTimeout(() => this.start(r), this.config.modelsGraceMs).unref();
    }
    if (r.models === undefined && !r.modelsUnknownTooLong && now - (this.unreadableSince.get(r) ?? now) >= this.config.modelsGraceMs) {
      r.catalog.markUnknownTooLong();
      this.log.warn(
        { event: 'models_grace_over', replica: r.name },
        `the model list of ${r.name} was never readable within --models-grace; it now takes only requests that name no model`,
      );
    }
  }

  private apply(r: Replica, entries: readonly ModelEntry[]): void {
    const ids = entries.map((m) => m.id);
    const before = r.models;
    const same = before !== undefined && before.size === ids.length && ids.every((id) => before.has(id));
    if (same) return;
    r.catalog.setModels(ids);
    this.log.info({ event: 'models', replica: r.name, models: ids }, `replica ${r.name} serves ${ids.length === 0 ? 'no model' : ids.join(', ')}`);
    const expected = r.placement?.model;
    if (expected !== undefined && !ids.includes(expected)) {
      this.log.warn(
        { event: 'models_mismatch', replica: r.name, expected, models: ids },
        `replica ${r.name} was launched for model ${expected} but lists ${ids.join(', ') || 'no model'}; routing by what it lists`,
      );
    }
  }
}
