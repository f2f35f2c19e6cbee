import { Inject, Injectable } from '@nestjs/common';
import type { ClientRequest } from 'node:http';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import type { Replica } from '../registry/replica.js';
import { requestTo } from '../registry/replica-endpoint.js';
import { AdmissionService } from '../routing/admission.service.js';
import { RoutingService } from '../routing/routing.service.js';
import type { Exchange } from './exchange.js';
import { upstreamHeaders } from './upstream.js';
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
    let settled = false;
    let req: ClientRequest | undefined;
    const end = (failure?: string): void => {
      if (settled) return;
      settled = true;
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
    };
    const copy = { abort: (reason: string) => req?.destroy(new Error(reason)) };
    home.occupy(copy);
    const timer = setTimeout(() => req?.destroy(new Error(`no answer within ${this.config.requestTimeoutMs} ms`)), this.config.requestTimeoutMs);
    if (body === undefined) return end('the request body is not a JSON object');
    const ep = home.endpoint;
    const headers = upstreamHeaders(ex, ep.hostHeader);
    headers['content-length'] = body.length;
    headers[WARM_HEADER] = '1';
    req = requestTo(ep, { method: 'POST', path: ex.req.url, headers, agent: ep.agent });
    req.on('error', (err) => end(err.message));
    req.once('response', (res) => {
      const status = res.statusCode ?? 0;
      res.on('error', () => undefined); // the 'close' check decides
      res.once('close', () => end(status >= 200 && status < 300 && res.complete ? undefined : `status ${status}${res.complete ? '' : ', answer cut short'}`));
      res.resume();
    });
    req.end(body);
  }
}
