import { Inject, Injectable } from '@nestjs/common';
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { HealthService } from '../health/health.service.js';
import type { Replica } from '../registry/replica.js';
import { requestTo } from '../registry/replica-endpoint.js';
import { RoutingService } from '../routing/routing.service.js';
import { AdmissionService, type Routed } from '../routing/admission.service.js';
import type { Refusal, RouteRequest } from '../routing/route-request.js';
import { outcomeOf, switched } from '../routing/routing.policy.js';
import { Exchange } from './exchange.js';
import { ExchangeObserver } from './exchange.observer.js';
import { RequestIntake } from './request-intake.service.js';
import { noReplicaMessage } from './router-error.js';
import { relayBody, responseHeaders, upstreamHeaders } from './upstream.js';
import { WarmCopies } from './warm-copy.service.js';

/**
 * The data plane (contract §3), mounted on the HTTP server for every `/v1/` request ahead of Fastify
 * (see app.factory.ts and docs/design.md §3): the intake reads the request as far as its routing
 * keys, the routing policy picks a replica, then the exact bytes go out with one `http.request` on
 * the replica's keep-alive agent and the answer is relayed chunk by chunk.
 * The only code that forwards client traffic to replicas (health probes and model discovery open
 * their own connections on the endpoint's probe agent).
 */
@Injectable()
export class DataPlaneService {
  constructor(
    private readonly config: RouterConfig,
    private readonly intake: RequestIntake,
    private readonly routing: RoutingService,
    private readonly admission: AdmissionService,
    private readonly health: HealthService,
    private readonly observer: ExchangeObserver,
    private readonly warm: WarmCopies,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {
    // A replica that turns ready may take queued requests; one that turns unready may leave them
    // nowhere to go (answered at once rather than at the queue timeout).
    health.onTransition(() => this.admission.pump());
  }

  /**
   * The HTTP server's entry for every `/v1/` request. It never throws and leaves no promise
   * floating: a throw anywhere in handle() is a router bug, answered as one (ExchangeObserver.internalError)
   * while the server goes on serving the next request.
   */
  serve(req: IncomingMessage, res: ServerResponse): void {
    const ex = new Exchange(req, res);
    this.handle(ex).catch((err: unknown) => this.observer.internalError(ex, err));
  }

  /** One `/v1/` request, from arrival to the end of the response. */
  private async handle(ex: Exchange): Promise<void> {
    this.observer.arrived();
    ex.onAbort = (reason) => this.aborted(ex, reason);
    ex.res.once('close', () => this.closed(ex));
    const request = await this.intake.routeRequest(ex);
    if (request === undefined) return;
    const d = this.routing.route(request);
    if (d.kind === 'wait') return this.wait(ex, request);
    if (d.kind === 'none') return ex.fail('no_replica_available', 'no_replica', noReplicaMessage(request.model));
    this.send(ex, d);
  }

  private send(ex: Exchange, d: Routed): void {
    ex.outcome = outcomeOf(d);
    ex.timer = setTimeout(() => this.timedOut(ex, 'request'), this.config.requestTimeoutMs);
    this.dispatch(ex, d.replica);
    if (d.kind === 'initialize' && d.home !== undefined && !ex.closed) this.warm.send(ex, d.replica, d.home);
  }

  /** Every candidate is at its max_inflight: wait in the admission queue (contract §3), or 503 at once. */
  private wait(ex: Exchange, request: RouteRequest): void {
    const timeoutSeconds = this.admission.timeoutSeconds;
    const waiter = {
      request,
      admit: (d: Routed) => this.send(ex, d),
      refuse: (why: Refusal) => {
        if (why === 'no_replica') return ex.fail('no_replica_available', 'no_replica', noReplicaMessage(request.model));
        if (why === 'shutdown') {
          ex.res.setHeader('connection', 'close');
          return ex.fail('shutting_down', 'rejected');
        }
        ex.fail('overloaded', 'rejected', `no replica had room within the router's queue timeout (${timeoutSeconds} s)`);
      },
    };
    if (!this.admission.enqueue(waiter)) {
      const full = `every replica is at its max_inflight and the router's queue is full (${this.config.queueMax} requests)`;
      return ex.fail('overloaded', 'rejected', full);
    }
    ex.waiter = waiter;
  }

  private dispatch(ex: Exchange, r: Replica): void {
    // The client may have gone while the body or the shared store was awaited: nothing to send,
    // and counting it now would never be undone (the close handler already ran).
    if (ex.closed) return;
    ex.attempts++;
    ex.connected = false;
    ex.occupy(r);
    const ep = r.endpoint;
    const body = ex.body!;
    const proxyReq = requestTo(ep, { method: ex.req.method, path: ex.req.url, headers: upstreamHeaders(ex, ep.hostHeader), agent: ep.agent });
    ex.proxyReq = proxyReq;
    proxyReq.once('socket', (socket: Socket) => this.onSocket(proxyReq, socket, ex));
    proxyReq.once('response', (proxyRes: IncomingMessage) => this.onResponse(proxyRes, ex));
    proxyReq.on('error', (err: NodeJS.ErrnoException) => this.onError(err, ex, proxyReq));
    proxyReq.once('finish', () => (ex.at.upstreamWritten = performance.now()));
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
    ex.at.upstreamFirstByte = performance.now();
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
      ex.at.clientFirstByte = performance.now();
    }
    relayBody(ex, proxyRes, (seconds) => this.observer.chunkGap(seconds));
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
      const next = this.routing.reroute(ex.request!, r) ?? (staleReuse && r.routable ? r : undefined);
      if (next !== undefined) {
        this.log.debug({ reqId: ex.id, replica: r.name, retry: next.name, err: err.message }, 'connect failed; retrying once');
        ex.proxyReq = undefined;
        // The session is now pinned to the retry target; say so.
        if (next !== r) ex.outcome = switched('unhealthy');
        return this.dispatch(ex, next);
      }
    } else if (refused) {
      signal();
    }
    if (refused || staleReuse) return ex.fail('replica_unreachable', 'upstream_error', `replica ${r.name} is unreachable: ${err.message}`);
    if (!ex.res.headersSent) {
      this.health.upstreamFailed(r, err.message);
      return ex.fail('replica_disconnected', 'upstream_error', `replica ${r.name} failed: ${err.message}`);
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
    if (!ex.res.headersSent) return ex.fail('replica_timeout', 'upstream_timeout', `replica ${ex.replica?.name} timed out: ${msg}`);
    ex.cut('replica_timeout', msg);
  }

  /** The fleet cut the exchange (drain timeout): same client view as a replica that went away. */
  private aborted(ex: Exchange, reason: string): void {
    if (ex.cause !== undefined || ex.res.destroyed) return;
    ex.end('upstream_error', reason);
    ex.proxyReq?.destroy();
    if (!ex.res.headersSent) return ex.fail('replica_disconnected', 'upstream_error', reason);
    ex.cut('replica_disconnected', reason);
  }

  /** The upstream broke after the response started. */
  private broken(ex: Exchange, code: 'replica_disconnected', message: string): void {
    if (ex.cause !== undefined || ex.res.destroyed) return;
    ex.end('upstream_error', message);
    if (ex.replica) this.health.upstreamFailed(ex.replica, message);
    ex.cut(code, message);
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
    // A client that left before the response started: 499, not the 200 res.statusCode defaults to.
    if (ex.status === 0) ex.status = ex.cause === 'client_abort' && !ex.res.headersSent ? 499 : ex.res.statusCode;
    this.release(ex);
    this.observer.ended(ex);
  }

  private release(ex: Exchange): void {
    if (ex.vacate()) this.admission.pump();
  }
}
