import { Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { RegistryService } from '../registry/registry.service.js';
import type { Replica } from '../registry/replica.js';
import { RoutingService } from './routing.service.js';
import type { Decision } from './routing.policy.js';
import { ShutdownService } from '../lifecycle/shutdown.service.js';
import type { QueueOutcome, Refusal, RouteRequest } from './route-request.js';
import { RoutingMetrics } from './routing.metrics.js';

/** A decision that names a replica. */
export type Routed = Exclude<Decision<Replica>, { kind: 'none' } | { kind: 'wait' }>;

/** A request waiting for a replica with room: the data plane's side of it. */
export interface Waiter {
  /** The request as the intake read it (the queue routes it again as {@link queuedRequest} makes it). */
  readonly request: RouteRequest;
  /** A replica has room: dispatch there (the decision is applied: pinned, counted). */
  admit(d: Routed): void;
  /** Leave the queue unanswered by a replica: the data plane answers the client. */
  refuse(why: Refusal, waitedMs: number): void;
}

interface Waiting {
  readonly waiter: Waiter;
  readonly request: RouteRequest;
  readonly since: number;
  readonly timer: NodeJS.Timeout;
}

/**
 * Admission control (contract §3): when every routable replica is at its `max_inflight`, requests wait
 * here, first in first out, and the head is dispatched by the normal policy as soon as any replica
 * has room. Bounded in length (`--queue-max`) and in time (`--queue-timeout`). The one owner of the
 * queue; the data plane calls `pump()` whenever a place may have freed.
 *
 * Affinity: the queue does not wait for a session's own replica. A request waits only while every
 * candidate is full, and when a place frees it runs through the policy again: it keeps its pin if
 * its replica is the one with room, else it moves (`switch;reason=overload`). Waiting for one
 * replica would block the queue's head behind it and make the wait unbounded; one prefill elsewhere
 * costs less than that.
 */
@Injectable()
export class AdmissionService implements OnApplicationShutdown {
  /** Insertion-ordered: the first entry is the head. Deletion is O(1) for a client that leaves. */
  private readonly queue = new Map<Waiter, Waiting>();
  private pumping = false;

  constructor(
    private readonly config: RouterConfig,
    private readonly routing: RoutingService,
    registry: RegistryService,
    shutdown: ShutdownService,
    private readonly metrics: RoutingMetrics,
  ) {
    // Fewer routable replicas may leave queued requests with nowhere to go: answer them now.
    registry.onRemoved(() => this.pump());
    routing.onRelease(() => this.pump());
    // Queued requests are answered as shutdown begins, before the fleet drains.
    shutdown.register('admission queue', () => Promise.resolve(this.refuseAll()));
  }

  /** Requests waiting now. */
  get depth(): number {
    return this.queue.size;
  }

  get timeoutSeconds(): number {
    return Math.ceil(this.config.queueTimeoutMs / 1000);
  }

  /** Queue a request whose candidates are all full; false when the queue is full (503 at once). */
  enqueue(w: Waiter): boolean {
    if (this.queue.size >= this.config.queueMax) return false;
    const timer = setTimeout(() => this.refuse(w, 'timeout'), this.config.queueTimeoutMs);
    this.queue.set(w, { waiter: w, request: queuedRequest(w.request), since: performance.now(), timer });
    return true;
  }

  /** The client left while waiting: it is never sent, and its place is freed. */
  leave(w: Waiter): void {
    const q = this.take(w);
    if (q !== undefined) this.left('abandoned', q);
  }

  /** A place may have freed or the routable set changed: dispatch from the head while possible. */
  pump(): void {
    if (this.queue.size === 0 || this.pumping) return;
    this.pumping = true;
    try {
      for (const q of this.queue.values()) {
        const d = this.routing.route(q.request);
        if (d.kind === 'wait') return;
        this.take(q.waiter);
        if (d.kind === 'none') {
          this.left('no_replica', q);
          q.waiter.refuse('no_replica', performance.now() - q.since);
        } else {
          this.left('dispatched', q);
          q.waiter.admit(d);
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  /** Shutdown: every queued request is answered (503 shutting_down), none is lost. */
  refuseAll(): void {
    for (const w of [...this.queue.keys()]) this.refuse(w, 'shutdown');
  }

  onApplicationShutdown(): void {
    this.refuseAll();
  }

  private refuse(w: Waiter, why: Refusal): void {
    const q = this.take(w);
    if (q === undefined) return;
    this.left(why, q);
    w.refuse(why, performance.now() - q.since);
  }

  private take(w: Waiter): Waiting | undefined {
    const q = this.queue.get(w);
    if (q === undefined) return undefined;
    this.queue.delete(w);
    clearTimeout(q.timer);
    return q;
  }

  private left(outcome: QueueOutcome, q: Waiting): void {
    this.metrics.queueLeft(outcome, performance.now() - q.since);
  }
}

/** The request as the admission queue routes it when a place frees: no first-turn body, no other router's choice. */
function queuedRequest(r: RouteRequest): RouteRequest {
  return { sessionId: r.sessionId, publish: r.publish, prefix: r.prefix, model: r.model };
}
