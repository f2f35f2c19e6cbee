import { Inject, Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import type { Replica } from '../registry/replica.js';
import type { AttemptEvents, UpstreamAttempt } from '../registry/upstream-pool.js';
import { AdmissionService } from '../routing/admission.service.js';
import { RoutingService } from '../routing/routing.service.js';
import type { Exchange } from './exchange.js';
import { flatHeaders, upstreamHeaders } from './upstream.js';
import { ProxyMetrics } from './proxy.metrics.js';

/** The header that marks a warm copy to the replica (the simulator keeps its cache totals apart). */
export const WARM_HEADER = 'x-router-warm';

/**
 * The request body of a warm copy: the first turn's JSON with one token to generate and no stream
 * (`max_tokens: 1`; `max_completion_tokens`, `stream_options` dropped; `n` set to 1), so the home
 * replica prefills the prompt, the part a later turn reuses, and spends almost nothing on decoding.
 * Undefined when the body is not a JSON object (then there is nothing an engine would cache).
 */
export function warmBody(body: Buffer): Buffer | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const o = parsed as Record<string, unknown>;
  o.max_tokens = 1;
  o.stream = false;
  delete o.max_completion_tokens;
  delete o.stream_options;
  if (o.n !== undefined) o.n = 1;
  return Buffer.from(JSON.stringify(o));
}

/**
 * Sends warm hand-off copies (routing.policy.ts, warmHome): while `served` answers a new conversation's
 * first turn, the same prompt goes to its `home`, where its later turns will find it cached. A copy
 * counts in the home's in-flight load (it is work there, and a drain waits for it or cuts it) but in
 * no client metric; its answer is read and dropped. If it fails, the conversation is pinned back
 * to `served`, which holds the prefix. Not retried, never a health signal.
 */
@Injectable()
export class WarmCopies {
  constructor(
    private readonly config: RouterConfig,
    private readonly routing: RoutingService,
    private readonly admission: AdmissionService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
    private readonly metrics: ProxyMetrics,
  ) {}

  handOff(ex: Exchange, served: Replica, home: Replica): void {
    const request = ex.request!;
    ex.home = home.name;
    const body = warmBody(ex.body!);
    let attempt: UpstreamAttempt<WarmCopy> | undefined;
    const copy: WarmCopy = {
      status: 0,
      settled: false,
      settle: (failure?: string) => {
        if (copy.settled) return;
        copy.settled = true;
        clearTimeout(timer);
        home.vacate(copy);
        this.admission.pump();
        if (failure !== undefined) {
          this.routing.warmFailed(request, home, served);
          this.log.warn(
            { event: 'warm_copy_failed', reqId: ex.id, replica: home.name, served: served.name, err: failure },
            `warm copy to ${home.name} failed: ${failure}`,
          );
        }
        this.metrics.warmCopyEnded(home, failure === undefined);
      },
      abort: (reason: string) => {
        attempt?.abandon();
        copy.settle(reason);
      },
    };
    home.occupy(copy);
    const timer = setTimeout(() => copy.abort(`no answer within ${this.config.requestTimeoutMs} ms`), this.config.requestTimeoutMs);
    if (body === undefined) return copy.settle('the request body is not a JSON object');
    const ep = home.endpoint;
    const headers = upstreamHeaders(ex, ep.hostHeader);
    headers['content-length'] = body.length;
    headers[WARM_HEADER] = '1';
    attempt = ep.pool.send(copy, { method: 'POST', path: ex.req.url ?? '/', headers: flatHeaders(headers), body }, WARM_EVENTS);
  }
}

/** A warm copy in flight: counted on its home replica until it settles, once. */
interface WarmCopy {
  /** The home's status code, 0 until it answered. */
  status: number;
  settled: boolean;
  /** The copy ended: `failure` says why it did not complete with a 2xx. */
  settle(failure?: string): void;
  /** The drain cut it, or its timeout fired. */
  abort(reason: string): void;
}

/** What a warm copy's attempt reports: its answer is read to the end and dropped. */
const WARM_EVENTS: AttemptEvents<WarmCopy> = {
  sent: () => undefined,
  response: (a, status) => (a.ex.status = status),
  data: () => true,
  complete: (a) => a.ex.settle(a.ex.status >= 200 && a.ex.status < 300 ? undefined : `status ${a.ex.status}`),
  error: (a, err) => a.ex.settle(a.responded ? `status ${a.ex.status}, answer cut short` : err.message),
};
