import { Inject, Injectable } from '@nestjs/common';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import type { Exchange } from '../proxy/exchange.js';
import { ExchangeObserver } from '../proxy/exchange.observer.js';

const ms = (from: number, to: number): number | undefined => (from > 0 && to > 0 ? Math.round((to - from) * 1000) / 1000 : undefined);

/**
 * One JSON line per data-plane request (contract §9) with exactly one termination cause. The session id
 * is logged (it is the key an operator searches by); the Authorization header never is.
 */
@Injectable()
export class RequestLogService {
  constructor(
    observer: ExchangeObserver,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {
    observer.subscribe((ex) => this.write(ex));
  }

  private write(ex: Exchange): void {
    const cause = ex.cause ?? 'ok';
    const level = cause === 'ok' || cause === 'client_abort' ? 'info' : 'warn';
    if (!this.log.isLevelEnabled(level)) return;
    const end = performance.now();
    const line = {
      event: 'request',
      reqId: ex.id,
      method: ex.req.method,
      path: ex.req.url,
      session: ex.session?.id,
      replica: ex.replica?.name,
      decision: ex.outcome.header,
      ...(ex.home !== undefined ? { home: ex.home } : {}),
      ...(ex.worker !== undefined ? { worker: ex.worker } : {}),
      status: ex.status || (cause === 'client_abort' ? 499 : 0),
      cause,
      bytes_in: ex.bytesIn,
      bytes_out: ex.bytesOut,
      duration_ms: ms(ex.arrivedAt, end),
      ttfb_ms: ms(ex.arrivedAt, ex.at.clientFirstByte),
      attempts: ex.attempts,
      stream: ex.stream,
      ...(ex.detail !== undefined ? { detail: ex.detail } : {}),
    };
    this.log[level](line, 'request');
  }
}
