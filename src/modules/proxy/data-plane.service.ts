import { Inject, Injectable } from '@nestjs/common';
import http, { type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { InternalErrors } from '../../common/errors/internal-errors.js';
import { AffinityService } from '../affinity/affinity.service.js';
import { HealthService } from '../health/health.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { RegistryService } from '../registry/registry.service.js';
import type { Replica } from '../registry/replica.js';
import { RoutingService } from '../routing/routing.service.js';
import { AdmissionService, type Routed, type Waiter } from '../routing/admission.service.js';
import { ShutdownService } from '../lifecycle/shutdown.service.js';
import { affinityHeader } from '../routing/routing.policy.js';
import { readBody } from './body-reader.js';
import { copyEndToEnd } from './hop-by-hop.js';
import { Exchange } from './exchange.js';
import { ExchangeObserver } from './exchange.observer.js';
import { relayModels } from './models.handler.js';
import { sendRouterError, streamErrorEvent, type RouterErrorCode } from './router-error.js';

/**
 * The data plane (SPEC §3), mounted on the HTTP server for every `/v1/` request ahead of Fastify
 * (see app.factory.ts and docs/design.md §3): buffers the body (own cap), resolves the
 * session, asks the routing policy for a replica, then forwards the exact bytes with one
 * `http.request` on the replica's keep-alive agent and relays the answer chunk by chunk.
 * The only code that forwards client traffic to replicas (health probes and the `/v1/models`
 * fetch open their own connections on the endpoint's probe agent).
 */
@Injectable()
export class DataPlaneService {
  constructor(
    private readonly config: RouterConfig,
    private readonly registry: RegistryService,
    private readonly routing: RoutingService,
    private readonly affinity: AffinityService,
    private readonly health: HealthService,
    private readonly lifecycle: LifecycleService,
    private readonly observer: ExchangeObserver,
    private readonly admission: AdmissionService,
    shutdown: ShutdownService,
    private readonly internalErrors: InternalErrors,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {
    // A replica that turns ready may take queued requests; one that turns unready may leave them
    // nowhere to go (answered at once rather than at the queue timeout).
    health.onTransition(() => this.admission.pump());
    // Registered before the fleet's drain step: queued requests are answered as shutdown begins.
    shutdown.register('admission queue', () => Promise.resolve(this.admission.refuseAll()));
  }

  /**
   * The HTTP server's entry for every `/v1/` request. It never throws and leaves no promise
   * floating: a throw anywhere in handle() is a router bug, answered by internalError() while the
   * server goes on serving the next request.
   */
  serve(req: IncomingMessage, res: ServerResponse): void {
    const ex = new Exchange(req, res);
    this.handle(ex).catch((err: unknown) => this.internalError(ex, err));
  }

  /** One `/v1/` request, from arrival to the end of the response. */
  private async handle(ex: Exchange): Promise<void> {
    const { req, res } = ex;
    this.observer.arrived();
    ex.onAbort = (reason) => this.aborted(ex, reason);
    res.once('close', () => this.closed(ex));
    if (this.lifecycle.stopping) {
      ex.session = this.affinity.resolve(req.headers[this.affinity.headerName], undefined);
      res.setHeader('connection', 'close');
      return this.fail(ex, 'shutting_down', 'rejected');
    }
    const url = req.url ?? '/';
    if (req.method === 'GET' && (url === '/v1/models' || url.startsWith('/v1/models?'))) {
      ex.session = this.affinity.resolve(req.headers[this.affinity.headerName], undefined);
      return relayModels(ex, this.registry.list, this.config.modelsTimeoutMs);
    }
    const read = await readBody(req, this.config.maxBodyBytes);
    if (!read.ok) {
      ex.session = this.affinity.resolve(req.headers[this.affinity.headerName], undefined);
      if (read.reason === 'aborted') return void ex.end('client_abort');
      res.setHeader('connection', 'close');
      res.once('finish', () => req.socket.destroySoon());
      return this.fail(ex, 'body_too_large', 'rejected', `request body is larger than the router accepts (${this.config.maxBodyBytes} bytes)`);
    }
    ex.body = read.body;
    ex.bytesIn = read.body.length;
    ex.session = this.affinity.resolve(req.headers[this.affinity.headerName], read.body);
    // With a shared store, one bounded Redis read first; select and acquire stay synchronous.
    const publish = this.routing.shared.enabled ? await this.routing.syncShared(ex.session.id) : false;
    if (ex.closed) return;
    const d = this.routing.route(ex.session.id, publish);
    if (d.kind === 'wait') return this.wait(ex, ex.session.id, publish);
    if (d.kind === 'none') return this.fail(ex, 'no_replica_available', 'no_replica');
    this.send(ex, d);
  }

  private send(ex: Exchange, d: Routed): void {
    ex.decision = affinityHeader(d);
    ex.timer = setTimeout(() => this.timedOut(ex, 'request'), this.config.requestTimeoutMs);
    this.dispatch(ex, d.replica);
  }

  /** Every candidate is at its max_inflight: wait in the admission queue (SPEC §3), or 503 at once. */
  private wait(ex: Exchange, sessionId: string, publish: boolean): void {
    const waiter: Waiter = {
      sessionId,
      publish,
      admit: (d) => this.send(ex, d),
      refuse: (why) => {
        if (why === 'no_replica') return this.fail(ex, 'no_replica_available', 'no_replica');
        if (why === 'shutdown') {
          ex.res.setHeader('connection', 'close');
          return this.fail(ex, 'shutting_down', 'rejected');
        }
        this.fail(ex, 'overloaded', 'rejected', `no replica had room within the router's queue timeout (${this.admission.timeoutSeconds} s)`);
      },
    };
    if (!this.admission.enqueue(waiter)) {
      return this.fail(ex, 'overloaded', 'rejected', `every replica is at its max_inflight and the router's queue is full (${this.config.queueMax} requests)`);
    }
    ex.waiter = waiter;
  }

  private dispatch(ex: Exchange, r: Replica): void {
    // The client may have gone while the body or the shared store was awaited: nothing to send,
    // and counting it now would never be undone (the close handler already ran).
    if (ex.closed) return;
    ex.replica = r;
    ex.attempts++;
    ex.connected = false;
    r.outstanding++;
    r.inflight.add(ex);
    ex.counted = true;
    const ep = r.endpoint;
    const body = ex.body!;
    const proxyReq = (ep.scheme === 'https' ? https : http).request({
      host: ep.host,
      port: ep.port,
      method: ex.req.method,
      path: ex.req.url,
      headers: upstreamHeaders(ex, ep.hostHeader),
      agent: ep.agent,
    });
    ex.proxyReq = proxyReq;
    proxyReq.once('socket', (socket: Socket) => this.onSocket(proxyReq, socket, ex));
    proxyReq.once('response', (proxyRes: IncomingMessage) => this.onResponse(proxyRes, ex));
    proxyReq.on('error', (err: NodeJS.ErrnoException) => this.onError(err, ex, proxyReq));
    proxyReq.once('finish', () => (ex.upstreamWrittenAt = performance.now()));
    proxyReq.end(body.length > 0 ? body : undefined);
  }

  /** A socket was assigned (new or reused): arm the connect timeout if it is still connecting. */
  private onSocket(proxyReq: ClientRequest, socket: Socket, ex: Exchange): void {
    if (socket.connecting) {
      const t = setTimeout(() => {
        const e: NodeJS.ErrnoException = new Error(`connect to ${ex.replica!.url} timed out after ${this.config.connectTimeoutMs} ms`);
        e.code = 'ECONNTIMEOUT';
        proxyReq.destroy(e);
      }, this.config.connectTimeoutMs);
      socket.once(ex.replica!.endpoint.scheme === 'https' ? 'secureConnect' : 'connect', () => {
        clearTimeout(t);
        ex.connected = true;
      });
      socket.once('close', () => clearTimeout(t));
    } else {
      ex.connected = true;
    }
  }

  /** The replica answered: write its status and headers (plus the router's), then relay the body. */
  private onResponse(proxyRes: IncomingMessage, ex: Exchange): void {
    const r = ex.replica!;
    const res = ex.res;
    ex.proxyRes = proxyRes;
    ex.upstreamFirstByteAt = performance.now();
    ex.status = proxyRes.statusCode ?? 0;
    if (ex.status >= 500) this.health.upstreamFailed(r, `status ${ex.status}`);
    const headers = responseHeaders(proxyRes, ex);
    ex.stream = (proxyRes.headers['content-type'] ?? '').startsWith('text/event-stream');
    if (ex.stream) {
      ex.clearTimer();
      ex.timer = setTimeout(() => this.timedOut(ex, 'idle'), this.config.streamIdleTimeoutMs);
    }
    if (res.headersSent || res.destroyed) return void ex.proxyReq?.destroy();
    res.writeHead(ex.status, proxyRes.statusMessage, headers);
    // A stream's headers go out now, as the replica sent them: an engine answers the headers at
    // once and the first token only after prefill, and a client (or an ingress with a header
    // timeout) must not wait out the prefill to see the status. A plain answer's headers leave
    // with its first body bytes, one write instead of two.
    if (ex.stream) {
      res.flushHeaders();
      ex.clientFirstByteAt = performance.now();
    }
    // Relay by hand rather than pipe(): one listener does the accounting and the write, and the
    // client's back-pressure pauses the replica's socket.
    proxyRes.on('data', (c: Buffer) => {
      if (res.writableEnded || res.destroyed) return;
      if (ex.clientFirstByteAt === 0) ex.clientFirstByteAt = performance.now();
      ex.bytesOut += c.length;
      if (ex.stream) {
        const now = performance.now();
        if (ex.lastChunkAt > 0) this.observer.chunkGap((now - ex.lastChunkAt) / 1000);
        else ex.firstChunkAt = now;
        ex.lastChunkAt = now;
        ex.timer?.refresh();
        ex.tail = c.length >= 2 ? c.toString('latin1', c.length - 2) : ex.tail.slice(-1) + c.toString('latin1');
      }
      if (!res.write(c)) {
        proxyRes.pause();
        res.once('drain', () => proxyRes.resume());
      }
    });
    proxyRes.once('end', () => {
      if (!res.writableEnded && !res.destroyed) res.end();
    });
    proxyRes.on('error', () => undefined); // the 'close' check below decides
    proxyRes.once('close', () => {
      if (proxyRes.complete) {
        ex.clearTimer();
        ex.end('ok');
      } else {
        this.broken(ex, 'replica_disconnected', 'the replica closed the stream before it was complete');
      }
    });
  }

  /** The upstream exchange failed (connect, reset, timeout-destroy, TLS). */
  private onError(err: NodeJS.ErrnoException, ex: Exchange, from: ClientRequest): void {
    // An error of an attempt already given up (the retry runs on a new request) is not news.
    if (from !== ex.proxyReq || ex.cause !== undefined || ex.res.destroyed) return;
    const r = ex.replica!;
    // Failed before the connection was made (refused, unreachable, DNS, TLS, connect timeout), so
    // nothing reached the replica.
    const refused = !ex.connected;
    const staleReuse = ex.connected && ex.proxyReq?.reusedSocket === true && !ex.proxyRes && err.code === 'ECONNRESET';
    // Only a refusal (or an unreachable host, a TLS failure) proves the replica is not listening.
    // A connect timeout is no health signal at all: a replica whose accept queue is full (a
    // burst, a starved host) looks exactly like a dead host from here, and demoting it would
    // push its load onto the others. The request is still retried elsewhere; whether the replica
    // is alive is left to the active probe, which has its own timeout and fall count.
    const signal = (): void => {
      if (refused && err.code !== 'ECONNTIMEOUT') this.health.connectFailed(r, err.message, err.code);
    };
    if ((refused || staleReuse) && ex.attempts < 2) {
      this.release(ex);
      signal();
      const next = this.routing.reroute(ex.session!.id, r) ?? (staleReuse && r.routable ? r : undefined);
      if (next !== undefined) {
        this.log.debug({ reqId: ex.id, replica: r.name, retry: next.name, err: err.message }, 'connect failed; retrying once');
        ex.proxyReq = undefined;
        // The session is now pinned to the retry target; say so.
        if (next !== r) ex.decision = 'switch;reason=unhealthy';
        return this.dispatch(ex, next);
      }
    } else if (refused) {
      signal();
    }
    if (refused || staleReuse) return this.fail(ex, 'replica_unreachable', 'upstream_error', `replica ${r.name} is unreachable: ${err.message}`);
    if (!ex.res.headersSent) {
      this.health.upstreamFailed(r, err.message);
      return this.fail(ex, 'replica_disconnected', 'upstream_error', `replica ${r.name} failed: ${err.message}`);
    }
    this.broken(ex, 'replica_disconnected', err.message);
  }

  /** Request timeout (non-stream total) or stream idle timeout fired. */
  private timedOut(ex: Exchange, which: 'request' | 'idle'): void {
    if (ex.cause !== undefined) return;
    const ms = which === 'request' ? this.config.requestTimeoutMs : this.config.streamIdleTimeoutMs;
    const msg = which === 'request' ? `no complete answer within ${ms} ms` : `no data from the replica for ${ms} ms`;
    ex.end('upstream_timeout', msg);
    ex.proxyReq?.destroy();
    if (!ex.res.headersSent) return this.fail(ex, 'replica_timeout', 'upstream_timeout', `replica ${ex.replica?.name} timed out: ${msg}`);
    this.cut(ex, 'replica_timeout', msg);
  }

  /** The fleet cut the exchange (drain timeout): same client view as a replica that went away. */
  private aborted(ex: Exchange, reason: string): void {
    if (ex.cause !== undefined || ex.res.destroyed) return;
    ex.end('upstream_error', reason);
    ex.proxyReq?.destroy();
    if (!ex.res.headersSent) return this.fail(ex, 'replica_disconnected', 'upstream_error', reason);
    this.cut(ex, 'replica_disconnected', reason);
  }

  /** The upstream broke after the response started. */
  private broken(ex: Exchange, code: 'replica_disconnected', message: string): void {
    if (ex.cause !== undefined || ex.res.destroyed) return;
    ex.end('upstream_error', message);
    if (ex.replica) this.health.upstreamFailed(ex.replica, message);
    this.cut(ex, code, message);
  }

  /**
   * End a response that already started so that it never looks complete: a stream gets one final
   * error event and no [DONE]; any other body is closed abruptly.
   */
  private cut(ex: Exchange, code: 'replica_disconnected' | 'replica_timeout', message: string): void {
    ex.clearTimer();
    if (ex.stream && !ex.res.writableEnded) {
      const sep = ex.tail.endsWith('\n\n') || ex.bytesOut === 0 ? '' : '\n\n';
      ex.res.end(sep + streamErrorEvent(code, message));
    } else {
      ex.res.destroy();
    }
  }

  /**
   * handle() threw. Logged with the request id and counted
   * (`affinity_router_internal_errors_total{source="data_plane"}`); the client gets a 500
   * `internal_error` in the OpenAI error shape, naming only the request id, or a cut connection if
   * the response had started. The close handler then settles the exchange as for any request, with
   * the cause `internal_error`.
   */
  private internalError(ex: Exchange, err: unknown): void {
    const count = this.internalErrors.record('data_plane');
    this.log.error({ event: 'internal_error', source: 'data_plane', reqId: ex.id, method: ex.req.method, path: ex.req.url, count, err }, 'internal error while handling a request');
    try {
      ex.proxyReq?.destroy();
      this.fail(ex, 'internal_error', 'internal_error', `internal router error (request id ${ex.id})`);
    } catch {
      ex.res.destroy();
    }
  }

  /** Answer with a router error and record the cause. */
  private fail(ex: Exchange, code: RouterErrorCode, cause: Exchange['cause'] & string, message?: string): void {
    ex.clearTimer();
    ex.end(cause, message);
    if (ex.res.headersSent) return void ex.res.destroy();
    sendRouterError(ex.res, code, ex.routerHeaders(), message);
    ex.status = ex.res.statusCode;
  }

  /** The client side is closed (finished or gone): settle everything exactly once. */
  private closed(ex: Exchange): void {
    ex.closed = true;
    ex.clearTimer();
    if (ex.waiter !== undefined) this.admission.leave(ex.waiter);
    if (!ex.res.writableFinished) {
      ex.end('client_abort');
      ex.proxyReq?.destroy();
    } else {
      ex.end('ok');
    }
    if (ex.status === 0) ex.status = ex.res.statusCode;
    this.release(ex);
    this.observer.ended(ex);
  }

  private release(ex: Exchange): void {
    if (ex.counted && ex.replica) {
      ex.replica.outstanding--;
      ex.replica.inflight.delete(ex);
      ex.counted = false;
      ex.replica.requestEnded();
      this.admission.pump();
    }
  }
}

/**
 * The request headers sent to the replica: the client's minus hop-by-hop ones, `host` set to the
 * replica (the engine sees its own address), `X-Forwarded-*` appended, the resolved session and
 * request ids, and the length of the buffered body.
 */
function upstreamHeaders(ex: Exchange, hostHeader: string): OutgoingHttpHeaders {
  const req = ex.req;
  const inHeaders = req.headers;
  const out = copyEndToEnd(inHeaders, {});
  const clientHost = inHeaders.host;
  const encrypted = (req.socket as TLSSocket).encrypted === true;
  const port = clientHost !== undefined ? /:(\d+)$/.exec(clientHost)?.[1] : undefined;
  appendForwarded(out, 'x-forwarded-for', req.socket.remoteAddress ?? '');
  appendForwarded(out, 'x-forwarded-port', port ?? (encrypted ? '443' : '80'));
  appendForwarded(out, 'x-forwarded-proto', encrypted ? 'https' : 'http');
  out['x-forwarded-host'] = inHeaders['x-forwarded-host'] ?? clientHost ?? '';
  out.host = hostHeader;
  out['x-session-id'] = ex.session!.id;
  out['x-request-id'] = ex.id;
  const length = ex.body!.length;
  if (length > 0 || (req.method !== 'GET' && req.method !== 'HEAD')) out['content-length'] = length;
  else delete out['content-length'];
  return out;
}

function appendForwarded(h: OutgoingHttpHeaders, name: string, value: string): void {
  const prior = h[name];
  h[name] = prior === undefined ? value : `${String(prior)},${value}`;
}

/** The replica's response headers minus hop-by-hop ones, plus the router's own (SPEC §3). */
function responseHeaders(proxyRes: IncomingMessage, ex: Exchange): OutgoingHttpHeaders {
  return Object.assign(copyEndToEnd(proxyRes.headers, {}), ex.routerHeaders());
}
