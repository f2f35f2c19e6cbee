import { randomUUID } from 'node:crypto';
import type { Span } from '@opentelemetry/api';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { CLIENT_ID } from '../../common/client-id.js';
import type { ResolvedSession } from '../affinity/session-id.js';
import type { Replica } from '../registry/replica.js';
import type { UpstreamAttempt } from '../registry/upstream-pool.js';
import type { Waiter } from '../routing/admission.service.js';
import type { RouteRequest } from '../routing/route-request.js';
import { NO_ROUTE, type RouteOutcome } from '../routing/routing.policy.js';
import { errorBody, ROUTER_ERRORS, streamErrorEvent, type RouterErrorCode } from './router-error.js';

/** A settled exchange's client request (Exchange.release): nothing left to read. */
const SETTLED_REQUEST = Object.freeze({
  method: undefined,
  url: undefined,
  headers: Object.freeze({}),
  socket: Object.freeze({}),
}) as unknown as IncomingMessage;

/** A settled exchange's client response: sent, ended and destroyed, so that nothing writes to it. */
const SETTLED_RESPONSE = Object.freeze({
  headersSent: true,
  destroyed: true,
  closed: true,
  writableEnded: true,
  writableFinished: true,
  statusCode: 0,
  destroy: () => undefined,
}) as unknown as ServerResponse;

/** `\n\n` as {@link Exchange.tail} holds it: the end of an SSE event. */
const LF_LF = 0x0a0a;

/** How an exchange ended; exactly one per request (contract §9). */
export type TerminationCause = 'ok' | 'client_abort' | 'upstream_error' | 'upstream_timeout' | 'no_replica' | 'rejected' | 'internal_error';

/**
 * Everything the data plane knows about one request, from arrival to the end of the response. The
 * proxy module alone holds exchanges; the request log, metrics and speed feed read finished ones
 * (ExchangeObserver). Its ending is one of three methods: {@link fail} (a router error, or a
 * cut connection once the response started), {@link cut} (a started response that must never
 * look complete), {@link end} (the cause alone, when the response is already settled).
 */
export class Exchange {
  readonly id: string;
  readonly arrivedAt: number;
  /** The session as resolved from the header (and body): the response headers and the log. */
  session: ResolvedSession | undefined;
  /** What routing keys on, extracted once (RequestIntake); undefined for requests answered before routing. */
  request: RouteRequest | undefined;
  /** The routing decision, typed (the X-Router-Affinity header, the log's `decision`, the metrics' labels). */
  outcome: RouteOutcome = NO_ROUTE;
  /** Warm hand-off: the replica this new conversation lives on, when another one answers its first turn. */
  home: string | undefined;
  body: Buffer | undefined;
  replica: Replica | undefined;
  /** The client side is closed (finished or gone); set once by the proxy's close handler. */
  closed = false;
  /** Whether the current replica's in-flight count holds this exchange ({@link occupy}). */
  private counted = false;
  attempts = 0;
  /** The current attempt with a replica (ExchangeRelay), undefined before the first and between a failed one and its retry. */
  upstream: UpstreamAttempt<Exchange> | undefined;
  stream = false;
  timer: NodeJS.Timeout | undefined;
  /** Set once; the first terminal event wins. */
  cause: TerminationCause | undefined;
  status = 0;
  bytesIn = 0;
  bytesOut = 0;
  /**
   * performance.now() marks for the overhead and TTFT histograms and the speed estimate, 0 until
   * reached: the request body written upstream, the replica's first response byte, the client's
   * first byte, and the first and latest relayed chunk of a stream.
   */
  readonly at = { upstreamWritten: 0, upstreamFirstByte: 0, clientFirstByte: 0, firstChunk: 0, lastChunk: 0 };
  /** Last two bytes relayed (the one before last in the high byte), to close a torn SSE event before the router's own. */
  tail = 0;
  detail: string | undefined;
  /** Its place in the admission queue while it waits for a replica with room (contract §3). */
  waiter: Waiter | undefined;
  /** With `--workers N`: the worker process that served it (the request log's `worker`). */
  worker: number | undefined;
  /** With tracing on (docs/tracing.md): the request's server span, and the client span of the attempt in progress. */
  span: Span | undefined;
  attemptSpan: Span | undefined;
  /** Set by the proxy: cut this exchange (drain timeout). */
  onAbort: ((reason: string) => void) | undefined;

  private clientReq: IncomingMessage;
  private clientRes: ServerResponse;

  constructor(
    req: IncomingMessage,
    res: ServerResponse,
    /** performance.now() at arrival (a worker's request is reported by the primary with the worker's time). */
    arrivedAt = performance.now(),
  ) {
    this.clientReq = req;
    this.clientRes = res;
    this.arrivedAt = arrivedAt;
    const incoming = req.headers['x-request-id'];
    this.id = typeof incoming === 'string' && CLIENT_ID.test(incoming) ? incoming : randomUUID();
  }

  /** The client's request; after {@link release}, a stand-in with no method, URL or headers. */
  get req(): IncomingMessage {
    return this.clientReq;
  }

  /** The response to the client; after {@link release}, a stand-in that is sent, ended and destroyed. */
  get res(): ServerResponse {
    return this.clientRes;
  }

  /** The fleet cuts this exchange (a drain that timed out). */
  abort(reason: string): void {
    this.onAbort?.(reason);
  }

  /** Record how the exchange ended; the first cause wins. */
  end(cause: TerminationCause, detail?: string): void {
    if (this.cause === undefined) {
      this.cause = cause;
      if (detail !== undefined) this.detail = detail;
    }
  }

  /**
   * Answer with a router error in the OpenAI shape (a 503 with `Retry-After: 1`) and record the
   * cause; a response that already started is closed abruptly instead.
   */
  fail(code: RouterErrorCode, cause: TerminationCause, message?: string): void {
    this.clearTimer();
    this.end(cause, message);
    const res = this.res;
    if (res.headersSent) return void res.destroy();
    if (!res.destroyed) {
      const body = errorBody(code, message);
      const e = ROUTER_ERRORS[code];
      res.statusCode = e.status;
      for (const [k, v] of Object.entries(this.routerHeaders())) res.setHeader(k, v);
      res.setHeader('content-type', 'application/json');
      res.setHeader('content-length', Buffer.byteLength(body));
      if (e.status === 503) res.setHeader('retry-after', '1');
      res.end(body);
    }
    this.status = res.statusCode;
  }

  /** A router bug while handling it: 500 `internal_error` naming only the request id, or a cut connection once the response started. */
  failInternal(): void {
    try {
      this.upstream?.abandon();
      this.fail('internal_error', 'internal_error', `internal router error (request id ${this.id})`);
    } catch {
      this.res.destroy();
    }
  }

  /**
   * End a response that already started so that it never looks complete: a stream gets one final
   * error event and no [DONE]; any other body is closed abruptly.
   */
  cut(code: 'replica_disconnected' | 'replica_timeout', message: string): void {
    this.clearTimer();
    if (this.stream && !this.res.writableEnded) {
      const sep = this.tail === LF_LF || this.bytesOut === 0 ? '' : '\n\n';
      this.res.end(sep + streamErrorEvent(code, message));
    } else {
      this.res.destroy();
    }
  }

  /** Send to `r`: it counts in `r`'s load and `max_inflight`, and a drain of `r` waits for it or cuts it. */
  occupy(r: Replica): void {
    this.replica = r;
    r.occupy(this);
    this.counted = true;
  }

  /** The exchange left its replica (retry elsewhere, or the end): true when it was counted there, once per {@link occupy}. */
  vacate(): boolean {
    if (!this.counted || this.replica === undefined) return false;
    this.replica.vacate(this);
    this.counted = false;
    return true;
  }

  /** Headers every response carries, errors included (contract §3), set on `h` (a new object by default). */
  routerHeaders<H extends OutgoingHttpHeaders = Record<string, string>>(h: H = {} as H): H {
    const set = h as OutgoingHttpHeaders;
    set['x-request-id'] = this.id;
    set['x-router-affinity'] = this.outcome.header;
    if (this.session) set['x-session-id'] = this.session.id;
    if (this.replica) set['x-router-replica'] = this.replica.name;
    return h;
  }

  /** The same headers appended to a flat `[name, value, ...]` list (a relayed response's). */
  pushRouterHeaders(list: string[]): void {
    list.push('x-request-id', this.id, 'x-router-affinity', this.outcome.header);
    if (this.session) list.push('x-session-id', this.session.id);
    if (this.replica) list.push('x-router-replica', this.replica.name);
  }

  /**
   * The exchange is settled and observed: it lets go of the client's request and response, the
   * upstream ones, its body, session and routing key, and keeps its id, marks, counts and cause.
   * Whatever still points at it then holds a few hundred bytes, not the whole request: the
   * young-generation collector keeps every object an old one points at, dead or not, and an ended
   * exchange reached that way dragged its request, its response and their buffers into the old
   * generation (bench/RESULTS.md, "Ended exchanges let go"). A late event (a retry answer, an
   * upstream error) finds a response that is sent and destroyed, and does nothing.
   */
  release(): void {
    this.clientReq = SETTLED_REQUEST;
    this.clientRes = SETTLED_RESPONSE;
    this.upstream = undefined;
    this.body = undefined;
    this.request = undefined;
    this.session = undefined;
    this.waiter = undefined;
    this.onAbort = undefined;
  }

  clearTimer(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }
}
