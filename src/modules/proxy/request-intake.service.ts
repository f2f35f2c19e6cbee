import { Injectable } from '@nestjs/common';
import { AffinityService } from '../affinity/affinity.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import type { ModelEntry } from '../registry/model-entry.js';
import { RegistryService } from '../registry/registry.service.js';
import type { Replica } from '../registry/replica.js';
import type { RouteRequest } from '../routing/route-request.js';
import { RoutingService } from '../routing/routing.service.js';
import { BodyReader } from './body-reader.service.js';
import type { Exchange } from './exchange.js';
import { RequestReader, type Answer, type Refused } from './request-reader.js';
import { quotedModel } from './router-error.js';

/**
 * A `/v1/` request from arrival to its {@link RouteRequest}: what the router answers itself or
 * refuses before routing is answered here, so routing sees only requests it can place. The steps
 * that need only the request (RequestReader: shutdown, the request line, the body and its
 * encoding, a `model` that is not a string) and `GET /v1/models` (served from the discovered
 * lists); then a `model` that no replica serves (404); then, with a shared store, one bounded Redis
 * read.
 */
@Injectable()
export class RequestIntake {
  readonly reader: RequestReader;

  constructor(
    affinity: AffinityService,
    private readonly registry: RegistryService,
    private readonly routing: RoutingService,
    lifecycle: LifecycleService,
    bodies: BodyReader,
  ) {
    this.reader = new RequestReader(
      affinity,
      bodies,
      () => lifecycle.stopping,
      (ex) => relayModels(ex, registry.list),
    );
  }

  /**
   * The request's routing keys, or undefined when the exchange was answered here or the client
   * left. A request with a plain body waits for nothing but its body: decoding and the shared
   * store are awaited only when they apply (each await is a turn of the event loop per request).
   */
  async routeRequest(ex: Exchange): Promise<RouteRequest | undefined> {
    const read = await this.reader.read(ex);
    if (read === undefined) return undefined;
    const refused = this.placeable(read.request);
    if (refused !== undefined) return this.reader.answer(ex, read.header, refused);
    if (!this.routing.shared.enabled) return read.request;
    // With a shared store, one bounded Redis read first; select and acquire stay synchronous.
    const { publish, holder } = await this.routing.syncRequest(read.keys);
    if (ex.closed) return undefined;
    ex.request = { ...read.request, publish, holder };
    return ex.request;
  }

  /** The refusal of a request naming a model no replica serves (contract §4.3: no replica lists it, and every list is known). */
  placeable(request: RouteRequest): Refused | undefined {
    const model = request.model;
    if (model === undefined || this.registry.mayServe(model)) return undefined;
    const message = `the model ${quotedModel(model)} does not exist: no replica of this router serves it`;
    return { code: 'model_not_found', cause: 'rejected', message };
  }
}

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
function relayModels(ex: Exchange, table: readonly Replica[]): Answer | 'answered' {
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
    const why = table.some((r) => r.routable)
      ? 'no routable replica has a model list the router could read (affinity_router_replica_models_unreadable)'
      : undefined;
    return { code: 'no_replica_available', cause: 'no_replica', message: why };
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
  return 'answered';
}
