import type { PromptChain } from '../affinity/prefix-hash.js';

/**
 * What routing needs of one request, extracted once as it arrives (proxy/request-intake.service.ts)
 * and passed whole to `route()`, `reroute()`, the admission queue and the warm copy.
 */
export interface RouteRequest {
  /** The effective session id: the client's (header or body), its stable replacement, or minted. */
  readonly sessionId: string;
  /** A session-less request's prompt chain (prefix affinity, contract §4.1): its conversation is found by it. */
  readonly prefix?: PromptChain;
  /** The body's string `model` (contract §4.3): only replicas serving it are candidates. */
  readonly model?: string;
  /** The buffered body of a request with an id: parsed for its prompt only on a first turn (no pin yet). */
  readonly body?: Buffer;
  /** The same first turn's prompt chain when a worker process read it from the body (then `body` is not sent). */
  readonly firstTurn?: PromptChain;
  /** With a shared store, a session-less conversation's replica as another router last chose it. */
  readonly holder?: string;
  /** With a shared store: publish the decision even when it keeps the pin (the local copy was stale). */
  readonly publish: boolean;
}

/** Why a request left the admission queue without being dispatched. */
export type Refusal = 'timeout' | 'no_replica' | 'shutdown';

/** How a request left the admission queue (the `outcome` label of its wait histogram). */
export type QueueOutcome = 'dispatched' | 'abandoned' | Refusal;
