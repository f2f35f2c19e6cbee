import { Inject, Injectable } from '@nestjs/common';
import { InternalErrors } from '../../common/errors/internal-errors.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import type { Exchange } from './exchange.js';
import { ProxyMetrics } from './proxy.metrics.js';

export type ExchangeListener = (ex: Exchange) => void;

/** Where exchanges are reported (request log, metrics, speed feed): arrivals, chunk gaps, ends, and router bugs. */
@Injectable()
export class ExchangeObserver {
  private readonly listeners: ExchangeListener[] = [];

  constructor(
    private readonly internalErrors: InternalErrors,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
    private readonly metrics: ProxyMetrics,
  ) {}

  subscribe(l: ExchangeListener): void {
    this.listeners.push(l);
  }

  /** Every data-plane request as it arrives (the "received" side of the accounting invariant). */
  arrived(): void {
    this.metrics.arrived();
  }

  /** Gap between two consecutive stream chunks relayed to a client. */
  chunkGap(seconds: number): void {
    this.metrics.chunkGap(seconds);
  }

  /** Once per request, when its client side closed. */
  ended(ex: Exchange): void {
    for (const l of this.listeners) l(ex);
  }

  /**
   * The data plane threw while handling `ex`: a router bug. Logged with the request id and counted
   * (`affinity_router_internal_errors_total{source="data_plane"}`); the client gets a 500
   * `internal_error` in the OpenAI error shape, naming only the request id, or a cut connection if
   * the response had started. The close handler then settles the exchange as for any request, with
   * the cause `internal_error`.
   */
  internalError(ex: Exchange, err: unknown): void {
    const count = this.internalErrors.record('data_plane');
    this.log.error(
      { event: 'internal_error', source: 'data_plane', reqId: ex.id, method: ex.req.method, path: ex.req.url, count, err },
      'internal error while handling a request',
    );
    ex.failInternal();
  }
}
