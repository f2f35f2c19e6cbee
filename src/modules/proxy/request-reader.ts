import type { AffinityService } from '../affinity/affinity.service.js';
import type { RequestKeys } from '../affinity/session-id.js';
import type { Refusal, RouteRequest } from '../routing/route-request.js';
import type { BodyReader, BodyResult } from './body-reader.service.js';
import type { Exchange } from './exchange.js';
import { noReplicaMessage, type RouterErrorCode } from './router-error.js';

/** Methods refused with 405: TRACE/TRACK echo requests back (credentials included), CONNECT tunnels. */
const REFUSED_METHODS = new Set(['TRACE', 'TRACK', 'CONNECT']);
/** What the data plane serves; the `Allow` header of a 405. */
const ALLOWED_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';

/**
 * How the intake answers a request it does not route: a router error (with `Connection: close`,
 * and `'unread'`: the socket dropped once answered, its body left unread; `Allow` for a 405), or
 * a client that left while its body was read.
 */
export type Answer = Refused | 'client_abort';

export interface Refused {
  readonly code: RouterErrorCode;
  readonly cause: 'rejected' | 'no_replica';
  readonly message?: string | undefined;
  readonly close?: 'close' | 'unread';
  readonly allow?: string;
}

/** A request read as far as routing needs: its keys and the bytes the engine will read. */
export interface ReadRequest {
  readonly keys: RequestKeys;
  readonly request: RouteRequest;
  readonly header: string | string[] | undefined;
}

/** What answers `GET /v1/models` (the primary from the lists it holds; a worker by asking the primary). */
export type ModelListAnswer = (ex: Exchange) => Answer | 'answered';

/**
 * The steps of a `/v1/` request's intake that need nothing but the request and the config, shared
 * by the primary's intake (RequestIntake) and a worker process's: shutdown (503 `shutting_down`),
 * the request line (405, 400), `GET /v1/models` (handed to `models`), the body within `--max-body`
 * and `--body-memory` (413, 503), its encoding (415, 400, 413), a `model` that is not a string
 * (400). The first step that refuses answers the request.
 */
export class RequestReader {
  constructor(
    private readonly affinity: AffinityService,
    readonly bodies: BodyReader,
    private readonly stopping: () => boolean,
    private readonly models: ModelListAnswer,
  ) {}

  /**
   * The request's keys and its {@link RouteRequest} (also set on `ex.request`), or undefined when
   * the exchange was answered here or the client left. A request with a plain body waits for
   * nothing but its body.
   */
  async read(ex: Exchange): Promise<ReadRequest | undefined> {
    const header = ex.req.headers[this.affinity.headerName];
    const early = this.beforeBody(ex, header);
    if (early !== undefined) return early === 'answered' ? undefined : this.answer(ex, header, early);
    const read = await this.bodies.readAll(ex.req, ex.res);
    const plain = this.takeBody(ex, read);
    if (!Buffer.isBuffer(plain)) return this.answer(ex, header, plain);
    const keys = this.readKeys(ex, plain, header);
    if (!('session' in keys)) return this.answer(ex, header, keys);
    // A session-less body was parsed already (resolve); one with an id is read only if it has no pin.
    const request: RouteRequest = {
      sessionId: keys.session.id,
      publish: false,
      prefix: keys.prefix,
      model: keys.model,
      body: keys.session.source === 'minted' ? undefined : plain,
    };
    ex.request = request;
    return { keys, request, header };
  }

  /** The one answer of a request routing never sees; its session is the header's when the body gave none. */
  answer(ex: Exchange, header: string | string[] | undefined, a: Answer): undefined {
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
   * method or path, `GET /v1/models` ('answered' by {@link models}).
   */
  private beforeBody(ex: Exchange, header: string | string[] | undefined): Answer | 'answered' | undefined {
    const { method } = ex.req;
    const url = ex.req.url ?? '/';
    if (this.stopping()) return { code: 'shutting_down', cause: 'rejected', close: 'close' };
    if (refusedMethod(method)) {
      const path = url.split('?')[0].slice(0, 200);
      return { code: 'method_not_allowed', cause: 'rejected', message: `${method} is not allowed on ${path}`, allow: ALLOWED_METHODS };
    }
    if (hasDotSegment(url))
      return { code: 'invalid_path', cause: 'rejected', message: 'the request path has a "." or ".." segment (raw or percent-encoded); it is not forwarded' };
    if (!isModelList(method, url)) return undefined;
    ex.session = this.affinity.resolve(header, undefined).session;
    return this.models(ex);
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

function refusedMethod(method: string | undefined): boolean {
  return method !== undefined && REFUSED_METHODS.has(method);
}

export function isModelList(method: string | undefined, url: string): boolean {
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

/** The answer of a request that waited for a replica with room and left the queue unsent (contract §3). */
export function queueRefusal(why: Refusal, model: string | undefined, timeoutSeconds: number): Refused {
  if (why === 'no_replica') return noReplica(model);
  if (why === 'shutdown') return { code: 'shutting_down', cause: 'rejected', close: 'close' };
  return { code: 'overloaded', cause: 'rejected', message: `no replica had room within the router's queue timeout (${timeoutSeconds} s)` };
}

/** The answer when the admission queue is full. */
export function queueFull(queueMax: number): Refused {
  return { code: 'overloaded', cause: 'rejected', message: `every replica is at its max_inflight and the router's queue is full (${queueMax} requests)` };
}

/** The answer when no replica is routable for the request. */
export function noReplica(model: string | undefined): Refused {
  return { code: 'no_replica_available', cause: 'no_replica', message: noReplicaMessage(model) };
}
