import type { Refusal, Routed, Waiter } from '../routing/admission.service.js';
import type { InternalErrors } from '../../common/errors/internal-errors.js';
import type { AppLogger } from '../../common/logging/logger.js';
import type { Exchange } from './exchange.js';
import { noReplicaMessage, sendRouterError, streamErrorEvent, type RouterErrorCode } from './router-error.js';

/** Answer with a router error and record the cause. */
export function failExchange(ex: Exchange, code: RouterErrorCode, cause: Exchange['cause'] & string, message?: string): void {
  ex.clearTimer();
  ex.end(cause, message);
  if (ex.res.headersSent) return void ex.res.destroy();
  sendRouterError(ex.res, code, ex.routerHeaders(), message);
  ex.status = ex.res.statusCode;
}

/**
 * End a response that already started so that it never looks complete: a stream gets one final
 * error event and no [DONE]; any other body is closed abruptly.
 */
export function cutExchange(ex: Exchange, code: 'replica_disconnected' | 'replica_timeout', message: string): void {
  ex.clearTimer();
  if (ex.stream && !ex.res.writableEnded) {
    const sep = ex.tail.endsWith('\n\n') || ex.bytesOut === 0 ? '' : '\n\n';
    ex.res.end(sep + streamErrorEvent(code, message));
  } else {
    ex.res.destroy();
  }
}

/**
 * The admission queue's handle on a waiting exchange (contract §3): `admit` sends it on, `refuse`
 * answers it: 503 `no_replica_available`, `shutting_down` (with `Connection: close`) or `overloaded`.
 */
export function queuedExchange(ex: Exchange, sessionId: string, publish: boolean, admit: (d: Routed) => void, timeoutSeconds: number): Waiter {
  const refuse = (why: Refusal): void => {
    if (why === 'no_replica') return failExchange(ex, 'no_replica_available', 'no_replica', noReplicaMessage(ex.session?.model));
    if (why === 'shutdown') {
      ex.res.setHeader('connection', 'close');
      return failExchange(ex, 'shutting_down', 'rejected');
    }
    failExchange(ex, 'overloaded', 'rejected', `no replica had room within the router's queue timeout (${timeoutSeconds} s)`);
  };
  return { sessionId, publish, prefix: ex.session?.prefix, model: ex.session?.model, admit, refuse };
}

/**
 * The data plane threw while handling `ex`: a router bug. Logged with the request id and counted
 * (`affinity_router_internal_errors_total{source="data_plane"}`); the client gets a 500
 * `internal_error` in the OpenAI error shape, naming only the request id, or a cut connection if
 * the response had started. The close handler then settles the exchange as for any request, with
 * the cause `internal_error`.
 */
export function answerInternalError(ex: Exchange, err: unknown, errors: InternalErrors, log: AppLogger): void {
  const count = errors.record('data_plane');
  log.error(
    { event: 'internal_error', source: 'data_plane', reqId: ex.id, method: ex.req.method, path: ex.req.url, count, err },
    'internal error while handling a request',
  );
  try {
    ex.proxyReq?.destroy();
    failExchange(ex, 'internal_error', 'internal_error', `internal router error (request id ${ex.id})`);
  } catch {
    ex.res.destroy();
  }
}

/**
 * A body the router will not hold (contract §3): 413 `body_too_large` over `--max-body`, 503
 * `overloaded` (with Retry-After) when it does not fit in what is left of `--body-memory`. Both are
 * answered before the body is read; the connection closes after the answer, the unread body with it.
 */
export function refuseBody(ex: Exchange, reason: 'too_large' | 'over_budget', maxBody: number, bodyMemory: number): void {
  ex.res.setHeader('connection', 'close');
  ex.res.once('finish', () => ex.req.socket.destroySoon());
  if (reason === 'too_large') return failExchange(ex, 'body_too_large', 'rejected', `request body is larger than the router accepts (${maxBody} bytes)`);
  failExchange(ex, 'overloaded', 'rejected', `request bodies held by the router are at its memory budget (--body-memory ${bodyMemory} bytes); retry shortly`);
}
