import { Gauge, type Registry } from 'prom-client';
import type { RegistryService } from '../registry/registry.service.js';

/** The `model` label of a request with no `model` (or a non-JSON body). */
export const NO_MODEL = 'none';
/** The `model` label of a request naming a model no replica lists: a client's typo never becomes a series. */
export const UNLISTED_MODEL = 'unknown';

/**
 * The `model` label of a request (contract §4.3, §9): the model itself only when some replica lists it,
 * so the label's values are bounded by what the fleet serves, not by what clients send.
 */
export function modelLabel(model: string | undefined, registry: RegistryService): string {
  if (model === undefined) return NO_MODEL;
  for (const r of registry.list) if (r.models?.has(model) === true) return model;
  return UNLISTED_MODEL;
}

/** Routable replicas per model they list (LoRA adapters included), recomputed at each scrape. */
export function registerModelMetrics(reg: Registry, prefix: string, registry: RegistryService): void {
  new Gauge({
    name: `${prefix}model_replicas_ready`,
    help: 'Routable replicas serving each model (as declared or listed at their /v1/models); replicas whose list is not known yet count for none.',
    labelNames: ['model'],
    registers: [reg],
    collect() {
      const counts = new Map<string, number>();
      for (const r of registry.list) for (const m of r.models ?? []) counts.set(m, (counts.get(m) ?? 0) + (r.routable ? 1 : 0));
      this.reset();
      for (const [model, n] of counts) this.set({ model }, n);
    },
  });
}
