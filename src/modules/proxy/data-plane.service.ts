import { Inject, Injectable } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { HealthService } from '../health/health.service.js';
import type { Replica } from '../registry/replica.js';
import { RoutingService } from '../routing/routing.service.js';
import { AdmissionService, type Routed } from '../routing/admission.service.js';
import type { Refusal, RouteRequest } from '../routing/route-request.js';
import { outcomeOf } from '../routing/routing.policy.js';
import { Exchange } from './exchange.js';
import { ExchangeRelay, type RetryAnswer } from './exchange-relay.js';
import { ExchangeObserver } from './exchange.observer.js';
import { RequestIntake } from './request-intake.service.js';
import { noReplica, queueFull, queueRefusal } from './request-reader.js';
import { WarmCopies } from './warm-copy.service.js';

/**
 * The data plane (contract §3), mounted on the HTTP server for every `/v1/` request ahead of Fastify
 * (see app.factory.ts and docs/design.md §3): the intake reads the request as far as its routing
 * keys, the routing policy picks a replica, then the exact bytes go out on one connection of
 * the replica's keep-alive pool and the answer is relayed chunk by chunk.
 * The only code that forwards client traffic to replicas (health probes and model discovery open
 * their own connections on the endpoint's probe agent).
 */
@Injectable()
export class DataPlaneService extends ExchangeRelay {
  constructor(
    private readonly config: RouterConfig,
    private readonly intake: RequestIntake,
    private readonly routing: RoutingService,
    private readonly admission: AdmissionService,
    private readonly health: HealthService,
    private readonly observer: ExchangeObserver,
    private readonly warm: WarmCopies,
    @Inject(APP_LOGGER) log: AppLogger,
  ) {
    super(config, log);
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
    this.traceArrival(ex);
    this.handle(ex).catch((err: unknown) => this.observer.internalError(ex, err));
  }

  /** One `/v1/` request, from arrival to the end of the response. */
  private async handle(ex: Exchange): Promise<void> {
    this.observer.arrived();
    ex.onAbort = (reason) => this.aborted(ex, reason);
    ex.res.on('close', () => this.closed(ex));
    const request = await this.intake.routeRequest(ex);
    if (request === undefined) return;
    const d = this.routing.route(request);
    if (d.kind === 'wait') return this.wait(ex, request);
    if (d.kind === 'none') return this.intake.reader.answer(ex, undefined, noReplica(request.model));
    this.forwardTo(ex, d);
  }

  private forwardTo(ex: Exchange, d: Routed): void {
    this.start(ex, outcomeOf(d), d.replica);
    if (d.kind === 'initialize' && d.home !== undefined && !ex.closed) this.warm.handOff(ex, d.replica, d.home);
  }

  /** Every candidate is at its max_inflight: wait in the admission queue (contract §3), or 503 at once. */
  private wait(ex: Exchange, request: RouteRequest): void {
    const waiter = {
      request,
      admit: (d: Routed) => this.forwardTo(ex, d),
      refuse: (why: Refusal) => this.intake.reader.answer(ex, undefined, queueRefusal(why, request.model, this.admission.timeoutSeconds)),
    };
    if (!this.admission.enqueue(waiter)) return this.intake.reader.answer(ex, undefined, queueFull(this.config.queueMax));
    ex.waiter = waiter;
  }

  protected upstreamFailed(r: Replica, message: string): void {
    this.health.upstreamFailed(r, message);
  }

  protected connectFailed(r: Replica, message: string, code: string | undefined): void {
    this.health.connectFailed(r, message, code);
  }

  protected retryTarget(ex: Exchange, failed: Replica, staleReuse: boolean, signal: boolean, err: NodeJS.ErrnoException, answer: RetryAnswer): void {
    if (signal) this.connectFailed(failed, err.message, err.code);
    answer(this.routing.retryTarget(ex.request!, failed, staleReuse));
  }

  protected chunkGap(seconds: number): void {
    this.observer.chunkGap(seconds);
  }

  protected finished(ex: Exchange): void {
    if (ex.waiter !== undefined) this.admission.leave(ex.waiter);
    this.released(ex);
    this.observer.ended(ex);
  }

  protected released(ex: Exchange): void {
    if (ex.vacate()) this.admission.pump();
  }
}
