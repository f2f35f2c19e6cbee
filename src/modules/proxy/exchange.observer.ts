import { Injectable } from '@nestjs/common';
import type { Exchange } from './exchange.js';

export type ExchangeListener = (ex: Exchange) => void;

/** Where finished exchanges are reported (request log, metrics). Called once per request. */
@Injectable()
export class ExchangeObserver {
  private readonly listeners: ExchangeListener[] = [];

  subscribe(l: ExchangeListener): void {
    this.listeners.push(l);
  }

  ended(ex: Exchange): void {
    for (const l of this.listeners) l(ex);
  }
}
