import type { ModelEntry } from '../registry/model-entry.js';
import type { Replica } from '../registry/replica.js';
import type { Exchange } from './exchange.js';
import { sendRouterError } from './router-error.js';

/**
 * What one replica contributes to `GET /v1/models`: the entries of its last readable list (model
 * discovery's, `parent` of LoRA adapters included), else the models the router routes to it by
 * (declared in the config, or its host's model before discovery read it); undefined when unknown.
 */
function entriesOf(r: Replica): readonly ModelEntry[] | undefined {
  if (r.modelList !== undefined && !r.modelsDeclared) return r.modelList;
  if (r.models === undefined) return undefined;
  return [...r.models].map((id) => ({ id, object: 'model', owned_by: 'affinity-router' }));
}

/**
 * `GET /v1/models`: the union of what the routable replicas serve, from the lists model discovery
 * already holds (each read within `--models-timeout` and `--models-max-bytes`), deduplicated by
 * `id` (the first replica in table order that lists an id gives its entry), in the OpenAI list
 * shape. No replica is asked per call, so a client's call costs no fan-out and bounded memory; the
 * answer is at most one discovery period old. Nothing known → 503.
 */
export function relayModels(ex: Exchange, table: readonly Replica[]): void {
  const byId = new Map<string, ModelEntry>();
  let answered = 0;
  for (const r of table) {
    const entries = r.routable ? entriesOf(r) : undefined;
    if (entries === undefined) continue;
    // One replica's list alone: that replica answered (X-Router-Replica); several: none of them did.
    ex.replica = answered++ === 0 ? r : undefined;
    for (const m of entries) if (!byId.has(m.id)) byId.set(m.id, m);
  }
  if (answered === 0) {
    ex.end('no_replica');
    const why = table.some((r) => r.routable)
      ? 'no routable replica has a model list the router could read (affinity_router_replica_models_unreadable)'
      : undefined;
    return sendRouterError(ex.res, 'no_replica_available', ex.routerHeaders(), why);
  }
  const body = Buffer.from(JSON.stringify({ object: 'list', data: [...byId.values()] }));
  ex.status = 200;
  ex.bytesOut = body.length;
  ex.end('ok');
  ex.res.statusCode = 200;
  ex.res.setHeader('content-type', 'application/json');
  for (const [k, v] of Object.entries(ex.routerHeaders())) ex.res.setHeader(k, v);
  ex.res.setHeader('content-length', body.length);
  ex.res.end(body);
}
