import { Injectable } from '@nestjs/common';
import { AffinityService } from '../affinity/affinity.service.js';
import type { RequestKeys } from '../affinity/session-id.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import type { ModelEntry } from '../registry/model-entry.js';
import { RegistryService } from '../registry/registry.service.js';
import type { Replica } from '../registry/replica.js';
import type { RouteRequest } from '../routing/route-request.js';
import { RoutingService } from '../routing/routing.service.js';
import { BodyReader, type BodyResult } from './body-reader.service.js';
import type { Exchange } from './exchange.js';
import { quotedModel, type RouterErrorCode } from './router-error.js';

/** Methods refused with 405: TRACE/TRACK echo requests back (credentials included), CONNECT tunnels. */
const REFUSED_METHODS = new Set(['TRACE', 'TRACK', 'CONNECT']);
/** What the data plane serves; the `Allow` header of a 405. */
const ALLOWED_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';

/**
 * A `/v1/` request from arrival to its {@link RouteRequest}: what the router answers itself or
 * refuses before routing is answered here, so routing sees only requests it can place. In order:
 * shutdown (503 `shutting_down`), the request line (405, 400), `GET /v1/models` (served from the
 * discovered lists), the body within `--max-body` and `--body-memory` (413, 503), its encoding
 * (415, 400, 413), a `model` that is not a string (400) or that no replica serves (404); then, with
 * a shared store, one bounded Redis read.
 */
@Injectable()
export class RequestIntake {
  constructor(
    private readonly affinity: AffinityService,
    private readonly registry: RegistryService,
    private readonly routing: RoutingService,
    private readonly lifecycle: LifecycleService,
    private readonly bodies: BodyReader,
  ) {}

  /**
   * The request's routing keys, or undefined when the exchange was answered here or the client
   * left. The steps run in order and the first that answers the request ends it. A request with a
   * plain body waits for nothing but its body: decoding and the shared store are awaited only when
   * they apply (each await is a turn of the event loop per request).
   */
  async routeRequest(ex: Exchange): Promise<RouteRequest | undefined> {
    const header = ex.req.headers[this.affinity.headerName];
    const early = this.beforeBody(ex, header);
    if (early !== undefined) return early === 'answered' ? undefined : this.answer(ex, header, early);
    const read = await this.bodies.read(ex.req, ex.res);
    const plain = this.takeBody(ex, read);
    if (!Buffer.isBuffer(plain)) return this.answer(ex, header, plain);
    const keys = this.readKeys(ex, plain, header);
    if (!('session' in keys)) return this.answer(ex, header, keys);
    const { session, model } = keys;
    // A session-less body was parsed already (resolve); one with an id is read only if it has no pin.
    const request: RouteRequest = {
      sessionId: session.id,
      publish: false,
      prefix: keys.prefix,
      model,
      body: session.source === 'minted' ? undefined : plain,
    };
    ex.request = request;
    if (model !== undefined && !this.registry.mayServe(model)) {
      // contract §4.3: no replica lists it, and every list is known.
      const message = `the model ${quotedModel(model)} does not exist: no replica of this router serves it`;
      return this.answer(ex, header, { code: 'model_not_found', cause: 'rejected', message });
    }
    if (!this.routing.shared.enabled) return request;
    // With a shared store, one bounded Redis read first; select and acquire stay synchronous.
    const { publish, holder } = await this.routing.syncRequest(keys);
    if (ex.closed) return undefined;
    ex.request = { ...request, publish, holder };
    return ex.request;
  }

  /** The one answer of a request routing never sees; its session is the header's when the body gave none. */
  private answer(ex: Exchange, header: string | string[] | undefined, a: Answer): undefined {
    ex.session ??= this.affinity.resolve(header, undefined).session;
    if (a === 'client_abort') return void ex.end('client_abort');
    if (a.close !== undefined) ex.res.setHeader('connection', 'close');
    // An unread body goes with the connection.
    if (a.close === 'unread') ex.res.once('finish', () => ex.req.socket.destroySoon());
    if (a.allow !== undefined) ex.res.setHeader('allow', a.allow);
    ex.fail(a.code, a.cause, a.message);
  }

  /**
   * What is answered before the body is read: shutdown (503 with `Connection: close`), a refused
   * method or path, `GET /v1/models` ('answered': served from the discovered lists).
   */
  private beforeBody(ex: Exchange, header: string | string[] | undefined): Answer | 'answered' | undefined {
    const { method } = ex.req;
    const url = ex.req.url ?? '/';
    if (this.lifecycle.stopping) return { code: 'shutting_down', cause: 'rejected', close: 'close' };
    if (refusedMethod(method)) {
      const path = url.split('?')[0].slice(0, 200);
      return { code: 'method_not_allowed', cause: 'rejected', message: `${method} is not allowed on ${path}`, allow: ALLOWED_METHODS };
    }
    if (hasDotSegment(url))
      return { code: 'invalid_path', cause: 'rejected', message: 'the request path has a "." or ".." segment (raw or percent-encoded); it is not forwarded' };
    if (!isModelList(method, url)) return undefined;
    ex.session = this.affinity.resolve(header, undefined).session;
    return relayModels(ex, this.registry.list);
  }

  /**
   * The body as read within `--max-body` and the body memory budget (contract §3): the bytes
   * routing reads, or the refusal: 413 or 503 `overloaded` (the connection closes, the unread
   * body going with it), or 415, 400, 413 for its encoding.
   */
  private takeBody(ex: Exchange, read: BodyResult): Buffer | Answer {
    if (read.ok) {
      ex.body = read.body;
      ex.bytesIn = read.body.length;
      return read.plain;
    }
    if (read.reason === 'aborted') return 'client_abort';
    if (read.reason === 'undecodable') return { code: read.code, cause: 'rejected', message: read.message };
    if (read.reason === 'too_large') {
      const message = `request body is larger than the router accepts (${this.bodies.maxBytes} bytes)`;
      return { code: 'body_too_large', cause: 'rejected', message, close: 'unread' };
    }
    const message = `request bodies held by the router are at its memory budget (--body-memory ${this.bodies.capacity} bytes); retry shortly`;
    return { code: 'overloaded', cause: 'rejected', message, close: 'unread' };
  }

  /**
   * The session and routing keys read from the body as the engine reads it (`plain`: the bytes
   * themselves, or decoded per `Content-Encoding`; the original bytes are what is forwarded). A
   * `model` that is not a string is refused (400).
   */
  private readKeys(ex: Exchange, plain: Buffer, header: string | string[] | undefined): RequestKeys | Refused {
    const keys = this.affinity.resolve(header, plain);
    ex.session = keys.session;
    if (keys.modelType !== undefined) return { code: 'invalid_model', cause: 'rejected', message: `\`model\` must be a string, got ${keys.modelType}` };
    return keys;
  }
}

/**
 * How the intake answers a request it does not route: a router error (with `Connection: close`,
 * and `'unread'`: the socket dropped once answered, its body left unread; `Allow` for a 405), or
 * a client that left while its body was read.
 */
type Answer = Refused | 'client_abort';

interface Refused {
  readonly code: RouterErrorCode;
  readonly cause: 'rejected' | 'no_replica';
  readonly message?: string | undefined;
  readonly close?: 'close' | 'unread';
  readonly allow?: string;
}

function refusedMethod(method: string | undefined): boolean {
  return method !== undefined && REFUSED_METHODS.has(method);
}

function isModelList(method: string | undefined, url: string): boolean {
  return method === 'GET' && (url === '/v1/models' || url.startsWith('/v1/models?'));
}

/**
 * Whether the path of `url` has a `.` or `..` segment, counting `%2e` as a dot and `%2f`, `%5c`
 * and `\` as separators (as servers that decode before routing see it): once a replica or a proxy
 * in front of it normalises them, such a path could leave `/v1/`. Cheap for the common case: a
 * path with neither `.` nor `%` is returned at once.
 */
function hasDotSegment(url: string): boolean {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (!path.includes('.') && !path.includes('%')) return false;
  const plain = path.replace(/%2e/gi, '.').replace(/%2f|%5c|\\/gi, '/');
  return plain.split('/').some((s) => s === '.' || s === '..');
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
