/** Test support: replica rows for the routing policy's specs, mutable so a test can load them. */
import type { RoutableView } from './routing.policy.js';

export interface R extends RoutableView {
  name: string;
  index: number;
  routable: boolean;
  draining: boolean;
  full: boolean;
  load: number;
  slowness?: number;
}

/** Idle routable rows r0…r(n−1); with an array, one row per entry with that slowness (contract §4.2). */
export function table(rows: number | readonly number[]): R[] {
  const slowness = typeof rows === 'number' ? Array.from({ length: rows }, () => undefined) : rows;
  return slowness.map((s, i) => ({
    name: `r${i}`,
    index: i,
    routable: true,
    draining: false,
    full: false,
    load: 0,
    ...(s === undefined ? {} : { slowness: s }),
  }));
}
