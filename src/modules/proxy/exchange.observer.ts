import { Injectable } from '@nestjs/common';
import type { Exchange } from './exchange.js';

export type ExchangeListener = (ex: Exchange) => void;

/** Where finished exchanges are reported (request log, metrics). Called once per request. */
@Injectable()
export class ExchangeObserver {
  private readonly listeners: ExchangeListener[] = [];
  private readonly gapListeners: Array<(seconds: number) => void> = [];
  private readonly arrivalListeners: Array<() => void> = [];

  subscribe(l: ExchangeListener): void {
    this.listeners.push(l);
  }

  /** Every data-plane request as it arrives (the "received" side of the accounting invariant). */
  onArrival(l: () => void): void {
    this.arrivalListeners.push(l);
  }

  /** Gap between two consecutive stream chunks relayed to a client. */
  onChunkGap(l: (seconds: number) => void): void {
    this.gapListeners.push(l);
  }

  arrived(): void {
    for (const l of this.arrivalListeners) l();
  }

  chunkGap(seconds: number): void {
    for (const l of this.gapListeners) l(seconds);
  }

  ended(ex: Exchange): void {
    for (const l of this.listeners) l(ex);
  }
}
