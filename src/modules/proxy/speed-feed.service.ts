import { Injectable } from '@nestjs/common';
import { RoutingService } from '../routing/routing.service.js';
import type { Exchange } from './exchange.js';
import { ExchangeObserver } from './exchange.observer.js';

/**
 * Feeds speed-aware load (contract §4.2): every exchange a replica answered in full with a 2xx reports
 * its time in flight, from the request body written upstream to the end of the answer. Failures,
 * client aborts and error statuses are left out: a fast error says nothing about serving speed.
 */
@Injectable()
export class SpeedFeed {
  constructor(observer: ExchangeObserver, routing: RoutingService) {
    const speeds = routing.speeds;
    if (speeds === undefined) return;
    observer.subscribe((ex) => {
      const seconds = inFlightSeconds(ex, performance.now());
      if (seconds !== undefined) speeds.observe(ex.replica!, seconds);
    });
  }
}

/** The seconds `ex` spent on its replica, or undefined when it does not count as a speed sample. */
export function inFlightSeconds(ex: Exchange, endedAt: number): number | undefined {
  if (ex.replica === undefined || ex.cause !== 'ok' || ex.status < 200 || ex.status >= 300 || ex.at.upstreamWritten === 0) return undefined;
  return (endedAt - ex.at.upstreamWritten) / 1000;
}
