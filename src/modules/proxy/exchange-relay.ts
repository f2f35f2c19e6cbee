import { SpanStatusCode } from '@opentelemetry/api';
import { routeLabel } from '../../common/http/route-label.js';
import { endFailed, processTracing, sessionHash, type RouterTracing } from '../../common/tracing/tracing.js';
import type { AppLogger } from '../../common/logging/logger.js';
import type { Replica } from '../registry/replica.js';
import type { AttemptEvents, UpstreamAttempt } from '../registry/upstream-pool.js';
import { switched, type RouteOutcome } from '../routing/routing.policy.js';
import type { Exchange } from './exchange.js';
import { flatHeaders, relayChunk, relayEnd, responseHead, upstreamHeaders } from './upstream.js';

/** Errors of a request written on a reused socket that the replica had closed (or reset) before answering. */
const STALE_CODES = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

/** The timeouts of an exchange with a replica (contract §3). */
export interface RelayTimeouts {
  readonly requestTimeoutMs: number;
  readonly streamIdleTimeoutMs: number;
  readonly connectTimeoutMs: number;
}

/** Where a failed first attempt goes next: another replica (pinned there), or nowhere. */
export type RetryAnswer = (next: Replica | undefined) => void;

/**
 * One exchange with a replica, from the decision to the end of the response: the exact bytes go
 * out on one of the replica's pooled keep-alive connections, the answer is relayed chunk by
 * chunk, a refused or stale connection is retried once elsewhere, timeouts and cuts end it with
 * the truthful error. What the relay cannot decide itself (health signals, where a retry goes,
 * what happens once the exchange ends) is the subclass's: the primary's data plane answers from
 * its own tables, a worker process asks the primary (docs/workers.md).
 */
export abstract class ExchangeRelay {
  /** This process's tracing (installed before the relay is built), undefined when it is off. */
  private readonly tracing: RouterTracing | undefined = processTracing();

  constructor(
    protected readonly timeouts: RelayTimeouts,
    protected readonly log: AppLogger,
  ) {}

  /** A request arrived: its server span starts now, in the client's trace when it sent one. */
  protected traceArrival(ex: Exchange): void {
    if (this.tracing === undefined) return;
    const method = ex.req.method ?? 'GET';
    ex.span = this.tracing.serverSpan(method, routeLabel(ex.req.url), ex.req.headers);
  }

  /** A response of status >= 500, or a replica that broke the exchange: passive health. */
  protected abstract upstreamFailed(r: Replica, message: string): void;
  /** A connection the replica refused: passive health. */
  protected abstract connectFailed(r: Replica, message: string, code: string | undefined): void;
  /** A first attempt failed before the replica saw it: pick (and pin) where it goes next, then `answer`. */
  protected abstract retryTarget(ex: Exchange, failed: Replica, staleReuse: boolean, signal: boolean, err: NodeJS.ErrnoException, answer: RetryAnswer): void;
  /** The exchange left its replica (retry elsewhere, or the end). */
  protected abstract released(ex: Exchange): void;
  /** The client side closed; everything about the exchange is known. */
  protected abstract finished(ex: Exchange): void;
  /** Gap between two chunks of a relayed stream. */
  protected abstract chunkGap(seconds: number): void;

  /** Send `ex` to `r` as routed: the decision's header, the request timeout, the exchange. */
  protected start(ex: Exchange, outcome: RouteOutcome, r: Replica): void {
    ex.outcome = outcome;
    ex.span?.setAttributes({
      'affinity_router.replica': r.name,
      'affinity_router.decision': outcome.kind,
      'affinity_router.reason': outcome.reason,
      'affinity_router.model': ex.request?.model ?? '',
      'affinity_router.session.source': ex.session?.source ?? 'none',
      'affinity_router.session.hash': ex.session === undefined ? '' : sessionHash(ex.session.id),
      // From arrival to the decision: reading the body, asking the primary, the admission queue.
      'affinity_router.route_wait_ms': Math.round((performance.now() - ex.arrivedAt) * 1000) / 1000,
      'affinity_router.queued': ex.waiter !== undefined,
    });
    ex.timer = setTimeout(() => this.timedOut(ex, 'request'), this.timeouts.requestTimeoutMs);
    this.dispatch(ex, r);
  }

  private dispatch(ex: Exchange, r: Replica): void {
    // The client may have gone while the body or the shared store was awaited: nothing to send,
    // and counting it now would never be undone (the close handler already ran).
    if (ex.closed) return;
    ex.attempts++;
    ex.occupy(r);
    const ep = r.endpoint;
    const body = ex.body!;
    const headers = upstreamHeaders(ex, ep.hostHeader);
    if (ex.span !== undefined) {
      const attributes = { 'server.address': ep.host, 'server.port': ep.port, 'affinity_router.replica': r.name, 'affinity_router.attempt': ex.attempts };
      ex.attemptSpan = this.tracing?.attemptSpan(ex.span, `${ex.req.method ?? 'GET'} ${r.name}`, attributes, headers);
    }
    // `reset: false`: a connection that carried a body on a GET or DELETE stays kept alive (undici
    // would close it), as Node's agent kept it.
    const opts = { method: ex.req.method ?? 'GET', path: ex.req.url ?? '/', headers: flatHeaders(headers), body: body.length > 0 ? body : null, reset: false };
    const attempt = ep.pool.send(ex, opts, this.events);
    ex.upstream = attempt;
    if (attempt.dialling) this.armConnectTimeout(attempt);
  }

  /** What the current attempt of an exchange reports (one object, bound once). */
  private readonly events: AttemptEvents<Exchange> = {
    sent: (a) => (a.ex.at.upstreamWritten = performance.now()),
    response: (a, status, headers, statusText) => this.onResponse(a, status, headers, statusText),
    data: (a, chunk) => relayChunk(a.ex, chunk, this.gap, a),
    complete: (a) => this.onComplete(a),
    error: (a, err) => this.onError(err, a),
  };

  /** A new connection is being dialled: it must connect within `--connect-timeout`, or the attempt is given up. */
  private armConnectTimeout(a: UpstreamAttempt<Exchange>): void {
    const t = setTimeout(() => {
      if (a.connected || a.ex.upstream !== a) return;
      const e: NodeJS.ErrnoException = new Error(`connect to ${a.ex.replica!.url} timed out after ${this.timeouts.connectTimeoutMs} ms`);
      e.code = 'ECONNTIMEOUT';
      a.abandon();
      this.onError(e, a);
    }, this.timeouts.connectTimeoutMs);
    t.unref();
    a.connectTimer = t;
  }

  /** The replica answered: write its status and headers (plus the router's), then relay the body. */
  private onResponse(a: UpstreamAttempt<Exchange>, status: number, raw: Buffer[], statusText: string): void {
    const ex = a.ex;
    const r = ex.replica!;
    const res = ex.res;
    ex.at.upstreamFirstByte = performance.now();
    ex.status = status;
    ex.attemptSpan?.setAttribute('http.response.status_code', ex.status);
    if (ex.status >= 500) this.upstreamFailed(r, `status ${ex.status}`);
    const head = responseHead(raw, ex);
    ex.stream = head.stream;
    if (ex.stream) {
      ex.clearTimer();
      ex.timer = setTimeout(() => this.timedOut(ex, 'idle'), this.timeouts.streamIdleTimeoutMs);
    }
    if (res.headersSent || res.destroyed) return a.abandon();
    res.writeHead(ex.status, statusText === '' ? undefined : statusText, head.headers);
    // A stream's headers go out now, as the replica sent them: an engine answers the headers at
    // once and the first token only after prefill, and a client (or an ingress with a header
    // timeout) must not wait out the prefill to see the status. A plain answer's headers leave
    // with its first body bytes, one write instead of two.
    if (ex.stream) {
      res.flushHeaders();
      ex.at.clientFirstByte = performance.now();
    }
  }

  private readonly gap = (seconds: number): void => this.chunkGap(seconds);

  private onComplete(a: UpstreamAttempt<Exchange>): void {
    const ex = a.ex;
    ex.clearTimer();
    relayEnd(ex);
    ex.end('ok');
  }

  /** The upstream exchange failed (connect, reset, timeout, TLS, a body cut short). */
  private onError(err: NodeJS.ErrnoException, a: UpstreamAttempt<Exchange>): void {
    const ex = a.ex;
    // An error of an attempt already given up (the retry runs on a new request) is not news.
    if (a !== ex.upstream || ex.cause !== undefined || ex.res.destroyed) return;
    if (a.responded) return this.broken(ex, 'replica_disconnected', 'the replica closed the stream before it was complete');
    const r = ex.replica!;
    // Failed before the connection was made (refused, unreachable, DNS, TLS, connect timeout), so
    // nothing reached the replica.
    const refused = !a.connected;
    const staleReuse = a.connected && a.reused && STALE_CODES.has(err.code ?? '');
    // Only a refusal (or an unreachable host, a TLS failure) proves the replica is not listening.
    // A connect timeout is no health signal at all: a replica whose accept queue is full (a
    // burst, a starved host) looks exactly like a dead host from here, and demoting it would
    // push its load onto the others. The request is still retried elsewhere; whether the replica
    // is alive is left to the active probe, which has its own timeout and fall count.
    const signal = refused && err.code !== 'ECONNTIMEOUT';
    if ((refused || staleReuse) && ex.attempts < 2) {
      if (ex.attemptSpan !== undefined) endFailed(ex.attemptSpan, `${err.code ?? 'error'}: ${err.message}`);
      ex.attemptSpan = undefined;
      this.released(ex);
      ex.upstream = undefined;
      return this.retryTarget(ex, r, staleReuse, signal, err, (next) => {
        if (next === undefined || ex.closed) return this.unreachable(ex, r, err);
        this.log.debug({ reqId: ex.id, replica: r.name, retry: next.name, err: err.message }, 'connect failed; retrying once');
        // The session is now pinned to the retry target; say so.
        if (next !== r) ex.outcome = switched('unhealthy');
        this.dispatch(ex, next);
      });
    }
    if (signal) this.connectFailed(r, err.message, err.code);
    if (refused || staleReuse) return this.unreachable(ex, r, err);
    this.upstreamFailed(r, err.message);
    ex.fail('replica_disconnected', 'upstream_error', `replica ${r.name} failed: ${err.message}`);
  }

  private unreachable(ex: Exchange, r: Replica, err: Error): void {
    ex.fail('replica_unreachable', 'upstream_error', `replica ${r.name} is unreachable: ${err.message}`);
  }

  /** Request timeout (non-stream total) or stream idle timeout fired. */
  private timedOut(ex: Exchange, which: 'request' | 'idle'): void {
    if (ex.cause !== undefined) return;
    const ms = which === 'request' ? this.timeouts.requestTimeoutMs : this.timeouts.streamIdleTimeoutMs;
    const msg = which === 'request' ? `no complete answer within ${ms} ms` : `no data from the replica for ${ms} ms`;
    ex.end('upstream_timeout', msg);
    ex.upstream?.abandon();
    if (!ex.res.headersSent) return ex.fail('replica_timeout', 'upstream_timeout', `replica ${ex.replica?.name} timed out: ${msg}`);
    ex.cut('replica_timeout', msg);
  }

  /** The fleet cut the exchange (drain timeout): same client view as a replica that went away. */
  protected aborted(ex: Exchange, reason: string): void {
    if (ex.cause !== undefined || ex.res.destroyed) return;
    ex.end('upstream_error', reason);
    ex.upstream?.abandon();
    if (!ex.res.headersSent) return ex.fail('replica_disconnected', 'upstream_error', reason);
    ex.cut('replica_disconnected', reason);
  }

  /** The upstream broke after the response started. */
  private broken(ex: Exchange, code: 'replica_disconnected', message: string): void {
    if (ex.cause !== undefined || ex.res.destroyed) return;
    ex.end('upstream_error', message);
    if (ex.replica) this.upstreamFailed(ex.replica, message);
    ex.cut(code, message);
  }

  /** The client side is closed (finished or gone): settle everything exactly once. */
  protected closed(ex: Exchange): void {
    ex.closed = true;
    ex.clearTimer();
    if (!ex.res.writableFinished) {
      ex.end('client_abort');
      ex.upstream?.abandon();
    } else {
      ex.end('ok');
    }
    // A client that left before the response started: 499, not the 200 res.statusCode defaults to.
    if (ex.status === 0) ex.status = ex.cause === 'client_abort' && !ex.res.headersSent ? 499 : ex.res.statusCode;
    if (ex.span !== undefined) this.endSpans(ex);
    this.finished(ex);
    ex.release();
  }

  /** The attempt's client span and the request's server span end with the request's one cause. */
  private endSpans(ex: Exchange): void {
    const cause = ex.cause ?? 'ok';
    const failed = cause !== 'ok' && cause !== 'client_abort';
    const message = failed ? `${cause}${ex.detail === undefined ? '' : `: ${ex.detail}`}` : '';
    if (ex.attemptSpan !== undefined) {
      ex.attemptSpan.setAttribute('affinity_router.cause', cause);
      if (failed) ex.attemptSpan.setStatus({ code: SpanStatusCode.ERROR, message });
      ex.attemptSpan.end();
    }
    const span = ex.span!;
    span.setAttributes({
      'http.response.status_code': ex.status,
      'affinity_router.cause': cause,
      'affinity_router.stream': ex.stream,
      'affinity_router.attempts': ex.attempts,
    });
    if (failed || ex.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: message || `status ${ex.status}` });
    span.end();
  }
}
