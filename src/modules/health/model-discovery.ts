import { Inject, Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { RegistryService } from '../registry/registry.service.js';
import type { Replica } from '../registry/replica.js';
import { HealthService } from './health.service.js';
import { probe } from './probe.js';

/** Largest model list read (a few hundred LoRA adapters fit). */
const MAX_LIST_BYTES = 1024 * 1024;
/** Marks the request as the router's own, so a simulator does not count it as client traffic. */
const DISCOVERY_HEADERS = { 'x-router-probe': 'models' };

/** The ids of an OpenAI model list (`{"data": [{"id"}, ...]}`), or undefined when it is not one. */
export function modelIds(text: string): string[] | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  const data = typeof doc === 'object' && doc !== null ? (doc as { data?: unknown }).data : undefined;
  if (!Array.isArray(data)) return undefined;
  const ids: string[] = [];
  for (const m of data) {
    const id = typeof m === 'object' && m !== null ? (m as { id?: unknown }).id : undefined;
    if (typeof id === 'string' && id !== '') ids.push(id);
  }
  return ids;
}

/**
 * Model discovery (SPEC §4.3): each replica's `GET /v1/models`, read on the probe's own connection
 * (SPEC §3) when it becomes ready, and for every ready replica once at start and every
 * `--models-refresh` (both `refresh()`, called by HealthJobs). LoRA adapters an engine lists there are models like
 * any other. Replicas with declared `models` are never asked. A failed or malformed answer keeps
 * the list already known. The only code that changes `Replica.models`.
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
      const res = await probe(r.endpoint, '/v1/models', this.config.modelsTimeoutMs, MAX_LIST_BYTES, DISCOVERY_HEADERS);
      const ids = res.ok && res.body !== undefined ? modelIds(res.body) : undefined;
      if (ids === undefined || r.removed) {
        const why = res.ok ? 'the answer is not an OpenAI model list' : (res.error ?? `status ${res.status}`);
        this.log.debug({ event: 'models_unread', replica: r.name, reason: why }, `could not read the model list of ${r.name}: ${why}`);
        return;
      }
      this.apply(r, ids);
    } finally {
      this.inFlight.delete(r);
    }
  }

  private apply(r: Replica, ids: readonly string[]): void {
    const before = r.models;
    const same = before !== undefined && before.size === ids.length && ids.every((id) => before.has(id));
    if (same) return;
    r.models = new Set(ids);
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
