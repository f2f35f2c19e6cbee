import type { IncomingHttpHeaders } from 'node:http';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { RouterConfigFields } from '../../config/router-config.js';
import type { PromptChain } from '../affinity/prefix-hash.js';
import type { RequestKeys, ResolvedSession } from '../affinity/session-id.js';
import type { Refused } from './request-reader.js';
import type { TerminationCause } from './exchange.js';
import type { RouteOutcome } from '../routing/routing.policy.js';

/*
 * The messages between the primary and its worker processes (docs/workers.md),
 * over the fork's IPC channel with V8 serialisation (Buffers pass as bytes). Requests are numbered
 * per worker (`n`); every request a worker takes sends exactly one `end`, after at most one
 * `route`.
 */

/**
 * Bodies up to this size have their first-turn prompt chain read in the worker. A larger one is
 * sent when the primary asks for it: its session may be pinned already (by another worker), and
 * parsing a large body for nothing costs more than the round trip.
 */
export const FIRST_TURN_MAX_BYTES = 64 * 1024;

/** How many placed sessions a worker remembers, to leave out their prompt chain (oldest forgotten first). */
export const PLACED_SESSIONS_KEPT = 65_536;

/** What the primary needs of a request's head: the request log, the route label, warm copies. */
export interface RequestHead {
  readonly id: string;
  readonly method: string | undefined;
  readonly url: string | undefined;
  /**
   * The client's headers, sent only with `routing.warm_handoff` on (a warm copy replays them):
   * nothing else in the primary reads them, and sending them cost it a fifth of its CPU per request
   * with an OpenAI SDK's headers (bench/RESULTS.md).
   */
  readonly headers?: IncomingHttpHeaders;
  readonly remoteAddress: string | undefined;
}

/** How a worker dials a replica; the primary names it, the worker keeps one keep-alive pool per `url`. */
export interface ReplicaAddress {
  readonly name: string;
  readonly url: string;
  readonly scheme: 'http' | 'https';
  readonly host: string;
  readonly port: number;
  readonly caFile?: string | undefined;
  readonly tlsVerify?: boolean | undefined;
}

/** The marks of an exchange in epoch milliseconds (performance.timeOrigin + now), 0 until reached. */
export interface EpochMarks {
  readonly arrived: number;
  readonly upstreamWritten: number;
  readonly upstreamFirstByte: number;
  readonly clientFirstByte: number;
  readonly firstChunk: number;
  readonly lastChunk: number;
}

/** Everything the primary reports of a finished request (metrics, the request log, speed). */
export interface EndRecord {
  readonly session: ResolvedSession | undefined;
  readonly model: string | undefined;
  readonly outcome: RouteOutcome;
  readonly status: number;
  readonly cause: TerminationCause;
  readonly detail: string | undefined;
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly attempts: number;
  readonly stream: boolean;
  readonly marks: EpochMarks;
}

export type FromWorker =
  | { readonly t: 'ready' }
  | {
      readonly t: 'route';
      readonly n: number;
      readonly head: RequestHead;
      readonly arrived: number;
      readonly keys: RequestKeys;
      /** The bytes as received, sent only with `routing.warm_handoff` on: a warm copy replays them. */
      readonly body: Uint8Array | undefined;
      /**
       * The prompt chain of a session with an id that this worker has not seen placed, read from its
       * decoded body (up to {@link FIRST_TURN_MAX_BYTES}): a first turn is placed by it without the
       * primary asking for the body (`body?`), a round trip.
       */
      readonly firstTurn: PromptChain | undefined;
    }
  /** The decoded body (what routing reads; the bytes as received may be compressed). */
  | { readonly t: 'body'; readonly n: number; readonly body: Uint8Array }
  | {
      readonly t: 'retry';
      readonly n: number;
      readonly failed: string;
      readonly staleReuse: boolean;
      /** A refused connection: a health signal for `failed`. */
      readonly signal: boolean;
      readonly message: string;
      readonly code: string | undefined;
    }
  | { readonly t: 'health'; readonly replica: string; readonly kind: 'upstream' | 'connect'; readonly message: string; readonly code: string | undefined }
  /** `head` only for a request never routed (the primary holds the head of the others). */
  | { readonly t: 'end'; readonly n: number; readonly head: RequestHead | undefined; readonly record: EndRecord }
  | { readonly t: 'metrics'; readonly id: number; readonly metrics: MetricObjectWithValues<MetricValue<string>>[] };

export type ToWorker =
  /** The first message: the primary's configuration, and where its own listener answers what workers forward. */
  | { readonly t: 'config'; readonly config: RouterConfigFields; readonly primaryPort: number; readonly index: number }
  /** A config reload: the settings that change live (RouterConfig.update). */
  | { readonly t: 'reconfig'; readonly fields: Partial<RouterConfigFields> }
  | { readonly t: 'grant'; readonly n: number; readonly replica: ReplicaAddress; readonly outcome: RouteOutcome }
  | { readonly t: 'body?'; readonly n: number }
  | { readonly t: 'refuse'; readonly n: number; readonly refused: Refused }
  | { readonly t: 'retried'; readonly n: number; readonly replica: ReplicaAddress | undefined }
  | { readonly t: 'abort'; readonly n: number; readonly reason: string }
  | { readonly t: 'stopping' }
  | { readonly t: 'exit' }
  | { readonly t: 'metrics?'; readonly id: number }
  /** A client connection, its handle passed with the message, and the bytes the primary read from it. */
  | { readonly t: 'conn'; readonly head: Uint8Array };

/**
 * Messages to one process, sent together once per event-loop turn: under load a turn settles many
 * requests, and one IPC write per message was a third of the primary's time (bench/RESULTS.md).
 */
export class Batcher<T> {
  private queue: T[] = [];
  private scheduled = false;

  constructor(private readonly sink: (batch: T[]) => void) {}

  push(m: T): void {
    this.queue.push(m);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  flush(): void {
    this.scheduled = false;
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    this.sink(batch);
  }
}
