import { randomUUID } from 'node:crypto';
import { CLIENT_ID } from '../../common/client-id.js';
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Replica } from '../registry/replica.js';
import type { ResolvedSession } from '../affinity/session-id.js';
import type { Waiter } from '../routing/admission.service.js';
import { NO_ROUTE, type RouteOutcome } from '../routing/routing.policy.js';

/** How an exchange ended; exactly one per request (contract §9). */
export type TerminationCause = 'ok' | 'client_abort' | 'upstream_error' | 'upstream_timeout' | 'no_replica' | 'rejected' | 'internal_error';

/** Everything the data plane knows about one request, from arrival to the end of the response. */
export class Exchange {
  readonly id: string;
  readonly arrivedAt = performance.now();
  session: ResolvedSession | undefined;
  /** The routing decision, typed (the X-Router-Affinity header, the log's `decision`, the metrics' labels). */
  outcome: RouteOutcome = NO_ROUTE;
  /** Warm hand-off: the replica this new conversation lives on, when another one answers its first turn. */
  home: string | undefined;
  body: Buffer | undefined;
  replica: Replica | undefined;
  /** The client side is closed (finished or gone); set once by the proxy's close handler. */
  closed = false;
  /** Whether `replica.outstanding` currently counts this exchange. */
  counted = false;
  attempts = 0;
  proxyReq: ClientRequest | undefined;
  proxyRes: IncomingMessage | undefined;
  /** The upstream TCP/TLS connection was established for the current attempt. */
  connected = false;
  stream = false;
  timer: NodeJS.Timeout | undefined;
  /** Set once; the first terminal event wins. */
  cause: TerminationCause | undefined;
  status = 0;
  bytesIn = 0;
  bytesOut = 0;
  /**
   * performance.now() marks for the overhead and TTFT histograms and the speed estimate, 0 until
   * reached: the request body written upstream, the replica's first response byte, the client's
   * first byte, and the first and latest relayed chunk of a stream.
   */
  readonly at = { upstreamWritten: 0, upstreamFirstByte: 0, clientFirstByte: 0, firstChunk: 0, lastChunk: 0 };
  /** Last two bytes relayed, to close a torn SSE event before the router's own. */
  tail = '';
  detail: string | undefined;
  /** Its place in the admission queue while it waits for a replica with room (contract §3). */
  waiter: Waiter | undefined;
  /** Set by the proxy: cut this exchange (drain timeout). */
  onAbort: ((reason: string) => void) | undefined;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
  ) {
    const incoming = req.headers['x-request-id'];
    this.id = typeof incoming === 'string' && CLIENT_ID.test(incoming) ? incoming : randomUUID();
  }

  abort(reason: string): void {
    this.onAbort?.(reason);
  }

  end(cause: TerminationCause, detail?: string): void {
    if (this.cause === undefined) {
      this.cause = cause;
      if (detail !== undefined) this.detail = detail;
    }
  }

  /** Headers every response carries, errors included (contract §3). */
  routerHeaders(): Record<string, string> {
    const h: Record<string, string> = { 'x-request-id': this.id, 'x-router-affinity': this.outcome.header };
    if (this.session) h['x-session-id'] = this.session.id;
    if (this.replica) h['x-router-replica'] = this.replica.name;
    return h;
  }

  clearTimer(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }
}
