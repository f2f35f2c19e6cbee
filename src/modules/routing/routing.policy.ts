/**
 * The routing policy (contract §4) as a pure function: a read-only view of the replica table and the
 * session's pin go in, a decision comes out. No I/O, no mutation; the caller applies the decision
 * (pins the session, moves the cursor, counts outstanding).
 */

/** What the policy reads of a replica. */
export interface RoutableView {
  readonly name: string;
  /** Position in the live table, 0..N-1, contiguous. */
  readonly index: number;
  /** Ready and not draining. */
  readonly routable: boolean;
  /** At its `max_inflight` (contract §3 admission): routable, but takes nothing new for now. */
  readonly full: boolean;
  readonly draining: boolean;
  /**
   * In-flight requests the policy balances: this router's own count, plus (with several routers)
   * what the engine reports beyond it.
   */
  readonly load: number;
  /**
   * Seconds per request relative to the fleet median (contract §4.2), exactly 1 for a replica as fast as
   * the median within the estimator's tolerance; absent = 1 (no speed awareness).
   */
  readonly slowness?: number;
  /**
   * Requests the replica runs at once (its declared `max_inflight`), set only under speed-aware load:
   * below it a request starts at once and shares the batch, so one in flight costs 1/batch of a
   * request's time rather than a whole one. Absent: every request in flight is a request ahead.
   */
  readonly batch?: number;
}

/**
 * What load comparisons use: the expected wait of one more request, in request-times of a median
 * replica. `(load + 1) × slowness` treats what is in flight as a queue; with a declared `batch`
 * (a replica that runs that many at once and takes no more), `(1 + load / batch) × slowness`: a
 * replica with room starts the request at once, so a 4× slower replica with nothing in flight
 * costs more than a fast one half full. With slowness 1 and one batch size for all, both order
 * replicas exactly as `load` does.
 */
export function expectedWait(r: RoutableView): number {
  const s = r.slowness ?? 1;
  return r.batch === undefined ? (r.load + 1) * s : (1 + r.load / r.batch) * s;
}

export type SwitchReason = 'overload' | 'unhealthy' | 'draining' | 'removed' | 'expired' | 'model';

/**
 * Which replicas may take the request (contract §4.3: those serving its `model`); absent = all. A filter
 * over the live table, not a subset of it, so the rotation keeps its indexes and N.
 */
export type Candidates<R extends RoutableView> = ((r: R) => boolean) | undefined;

/** What the session directory said about the session's pin. */
export type PinState<R extends RoutableView> =
  | { readonly status: 'none' }
  | { readonly status: 'live'; readonly replica: R }
  | { readonly status: 'expired'; readonly replica: R }
  | { readonly status: 'released'; readonly replica: R; readonly reason: 'draining' | 'removed' }
  /** No session pin, but `replica` last served the longest matching prompt prefix (contract §4.1). */
  | { readonly status: 'prefix'; readonly replica: R };

/** `wait`: routable replicas exist but every one is full; the request waits in the admission queue. */
export type Decision<R extends RoutableView> =
  | { readonly kind: 'retain'; readonly replica: R }
  /** Kept on the replica holding the request's longest prompt prefix (a session-less request). */
  | { readonly kind: 'prefix'; readonly replica: R }
  /**
   * A new conversation. `home`, under warm hand-off only: where it is pinned and its later turns go,
   * when that is not `replica`, which answers this first turn while a copy prefills `home`.
   */
  | { readonly kind: 'initialize'; readonly replica: R; readonly home?: R }
  | { readonly kind: 'switch'; readonly replica: R; readonly reason: SwitchReason }
  | { readonly kind: 'wait' }
  | { readonly kind: 'none' };

/** Where a routed request's conversation lives from now on: its warm hand-off `home`, else the replica serving it. */
export function livesOn<R extends RoutableView>(d: Exclude<Decision<R>, { kind: 'wait' } | { kind: 'none' }>): R {
  return (d.kind === 'initialize' ? d.home : undefined) ?? d.replica;
}

/**
 * The routable replica with room minimising `(waitOf, (index − counter) mod N, index)`, N being
 * the whole table (`waitOf`: {@link expectedWait} unless given), or undefined when none is routable
 * and below its `max_inflight`.
 */
export function leastOutstanding<R extends RoutableView>(
  table: readonly R[],
  counter: number,
  exclude?: R,
  candidate?: Candidates<R>,
  waitOf: (r: R) => number = expectedWait,
): R | undefined {
  const n = table.length;
  let best: R | undefined;
  let bestWait = 0;
  let bestRot = 0;
  for (let i = 0; i < n; i++) {
    const r = table[i];
    if (!r.routable || r.full || r === exclude || (candidate !== undefined && !candidate(r))) continue;
    const rot = (((r.index - counter) % n) + n) % n;
    const wait = waitOf(r);
    if (best === undefined || wait < bestWait || (wait === bestWait && rot < bestRot)) {
      best = r;
      bestWait = wait;
      bestRot = rot;
    }
  }
  return best;
}

/** Decide where a request of a session goes, among the `candidate` replicas when given. */
export function decide<R extends RoutableView>(table: readonly R[], counter: number, pin: PinState<R>, slack: number, candidate?: Candidates<R>): Decision<R> {
  const least = leastOutstanding(table, counter, undefined, candidate);
  if (least === undefined) return table.some((r) => r.routable && (candidate === undefined || candidate(r))) ? { kind: 'wait' } : { kind: 'none' };
  switch (pin.status) {
    case 'none':
      return { kind: 'initialize', replica: least };
    case 'expired':
      return { kind: 'switch', replica: least, reason: 'expired' };
    case 'released':
      return { kind: 'switch', replica: least, reason: pin.reason };
    case 'live':
    case 'prefix': {
      // A prefix match is held to the same rule as a pin.
      const pinned = pin.replica;
      if (candidate !== undefined && !candidate(pinned)) return { kind: 'switch', replica: least, reason: 'model' };
      if (!pinned.routable) {
        return { kind: 'switch', replica: least, reason: pinned.draining ? 'draining' : 'unhealthy' };
      }
      // A full pinned replica is overloaded whatever the slack says: its next place goes to the queue.
      // The slack is in requests of a median replica: a slow replica's queue costs more per request.
      if (!pinned.full && expectedWait(pinned) <= expectedWait(least) + slack) {
        return pin.status === 'live' ? { kind: 'retain', replica: pinned } : { kind: 'prefix', replica: pinned };
      }
      return { kind: 'switch', replica: least, reason: 'overload' };
    }
  }
}

/**
 * A decision as the response header, the request log and the metrics show it: its kind and, for a
 * switch, why (`reason` is '' otherwise). Kept typed on the exchange, never parsed back from the header.
 */
export interface RouteOutcome {
  readonly kind: 'retain' | 'prefix' | 'initialize' | 'switch' | 'none';
  readonly reason: SwitchReason | '';
  /** The value of the `X-Router-Affinity` header: the kind, and `;reason=` for a switch. */
  readonly header: string;
}

function outcome(kind: RouteOutcome['kind'], reason: SwitchReason | ''): RouteOutcome {
  return { kind, reason, header: kind === 'switch' ? `switch;reason=${reason}` : kind };
}

/** Before routing, and for requests that are never routed (`X-Router-Affinity: none`). */
export const NO_ROUTE: RouteOutcome = outcome('none', '');

/** One shared outcome per kind and reason: nothing is allocated per request. */
const PLAIN = { retain: outcome('retain', ''), prefix: outcome('prefix', ''), initialize: outcome('initialize', ''), none: NO_ROUTE } as const;
const SWITCHES = new Map<SwitchReason, RouteOutcome>();

/** The outcome of a decision (a wait is shown as `none`). */
export function outcomeOf(d: Decision<RoutableView>): RouteOutcome {
  if (d.kind !== 'switch') return PLAIN[d.kind === 'wait' ? 'none' : d.kind];
  return switched(d.reason);
}

/** The outcome of moving a conversation for `reason` (also the proxy's, when it re-routes a failed attempt). */
export function switched(reason: SwitchReason): RouteOutcome {
  let o = SWITCHES.get(reason);
  if (o === undefined) SWITCHES.set(reason, (o = outcome('switch', reason)));
  return o;
}

/** The shared outcome of `kind` (and `reason`, for a switch): how a worker process's message names one. */
export function outcomeNamed(kind: RouteOutcome['kind'], reason: RouteOutcome['reason']): RouteOutcome {
  if (kind !== 'switch') return PLAIN[kind];
  return reason === '' ? outcome(kind, reason) : switched(reason);
}

/** The value of the `X-Router-Affinity` header for a decision. */
export function affinityHeader(d: Decision<RoutableView>): string {
  return outcomeOf(d).header;
}

/*
 * First turns: where a new conversation goes when part of its prompt is already cached somewhere (issue 15
 * item 2): many sessions of one app share a long system prompt, and a replica that served it
 * recently can skip its prefill.
 *
 * A partial match is worth load in proportion to its length: one request more in flight per
 * `BLOCKS_PER_LOAD` matched blocks, at most the slack. The matched replica wins when its load is
 * within that allowance of the least loaded; otherwise (and for a short match, such as a
 * one-sentence system prompt, whose allowance is 0) the normal rotation places the conversation.
 * So a long shared prompt pulls its conversations together until the replica holding it is a few
 * requests ahead, then new ones spill to the next replica, which becomes a second holder.
 */

/** Matched blocks (256 characters each, ~500 tokens of prefill for 8) worth one request in flight. */
export const BLOCKS_PER_LOAD = 8;

/** What the prefix index knows about a new conversation's prompt: who served its longest matching prefix. */
export interface CachedHint<R> {
  readonly target: R;
  readonly blocks: number;
}

/** The replica for a new conversation: `least` (the policy's choice), or the holder of a long enough cached prefix within its allowance. */
export function preferCached<R extends RoutableView>(least: R, hint: CachedHint<R> | undefined, slack: number): R {
  if (hint === undefined) return least;
  const r = hint.target;
  const allowance = Math.min(slack, Math.floor(hint.blocks / BLOCKS_PER_LOAD));
  if (allowance < 1 || r === least || !r.routable || r.full) return least;
  // Expected wait (contract §4.2): with equally fast replicas, the in-flight counts.
  return expectedWait(r) <= expectedWait(least) + allowance ? r : least;
}

/*
 * Warm hand-off (docs/design.md §6.2, issue 15): where a new conversation lives when that is not
 * where its first turn is fastest.
 *
 * KV-cache capacity does not depend on a replica's speed: a 4× slower replica holds as many
 * conversations' prefixes as a fast one. Expected wait keeps new conversations off it, because a
 * first turn there (a whole cold prefill) costs the client 4× as long; the fast replicas then hold
 * every conversation and evict each other's turns. Under warm hand-off a conversation's home is
 * chosen as in-flight counts alone would choose it (today's policy, which spreads conversations
 * over every cache); when that home is slower than the replica expected wait chose, the fast
 * replica answers the first turn and a one-token copy of it prefills the home off the client's
 * path. The later turns go home under the usual slack rule, where their prefix is cached.
 */

/**
 * Hand-off starts once the serving replica has this share of its declared batch in flight (2
 * requests without one). The router cannot see how full a cache is; how many requests a replica
 * runs at once is its nearest view of how many conversations it serves. Below it the fast
 * replicas hold every conversation and a hand-off only moves later turns to a slower replica: on
 * bench (v) at light load (10 req/s, 20 conversations in progress) an ungated hand-off raised the
 * mean TTFT 21% over speed-aware load alone at the same hit rate, gated 1.5% (4 copies, not 21);
 * at 30 req/s the gate changed nothing (96.0% of the oracle against 96.1%). Half the batch was
 * too late: 93.8%.
 */
export const BUSY_SHARE = 0.25;
const BUSY_WITHOUT_BATCH = 2;

/** In-flight count alone: how today's policy places a conversation. */
const inFlight = (r: RoutableView): number => r.load;

/**
 * The home of a new conversation whose first turn `served` answers: the routable replica with room
 * and the fewest in flight (ties by the rotation), when it is slower than `served` and `served` is
 * busy ({@link BUSY_SHARE}); otherwise undefined (the conversation lives where it is served).
 */
export function warmHome<R extends RoutableView>(table: readonly R[], counter: number, served: R, candidate?: Candidates<R>): R | undefined {
  const busy = served.batch === undefined ? BUSY_WITHOUT_BATCH : served.batch * BUSY_SHARE;
  if (served.load < busy) return undefined;
  const home = leastOutstanding(table, counter, undefined, candidate, inFlight);
  if (home === undefined || home === served) return undefined;
  return (home.slowness ?? 1) > (served.slowness ?? 1) ? home : undefined;
}
