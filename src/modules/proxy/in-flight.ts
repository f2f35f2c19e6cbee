import type { Abortable, Replica } from '../registry/replica.js';

/**
 * What is in flight on a replica (the proxy owns `Replica.outstanding` and `Replica.inflight`): a
 * client exchange, or a warm hand-off copy. Counted in its load and `max_inflight`, and cut by a
 * drain that times out.
 */
export function occupy(r: Replica, x: Abortable): void {
  r.outstanding++;
  r.inflight.add(x);
}

/** `x` left `r`, exactly once per {@link occupy}: a drain waiting for `r` to go idle may finish. The caller pumps the admission queue. */
export function vacate(r: Replica, x: Abortable): void {
  r.outstanding--;
  r.inflight.delete(x);
  r.requestEnded();
}
