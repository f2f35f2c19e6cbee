import type { ResolvedSession } from '../affinity/session-id.js';
import type { BodyBudget } from './body-budget.service.js';
import { readBody } from './body-reader.js';
import type { Exchange } from './exchange.js';
import { failExchange, refuseBody } from './exchange-end.js';
import { decodeForRouting } from './body-decoding.js';

/**
 * Reads the body of `ex` within `--max-body` and the body memory budget (contract §3) and notes it on
 * the exchange, its budget share given back when the exchange ends. A refusal (413, 503
 * `overloaded`) is answered here and a client that left is recorded; both resolve the session from
 * the header alone, for the response headers and the log. Returns the body, or undefined when the
 * exchange is over.
 */
export async function takeBody(ex: Exchange, budget: BodyBudget, maxBody: number, resolve: (body?: Buffer) => ResolvedSession): Promise<Buffer | undefined> {
  const read = await readBody(ex.req, maxBody, budget);
  if (!read.ok) {
    ex.session = resolve(undefined);
    if (read.reason === 'aborted') ex.end('client_abort');
    else refuseBody(ex, read.reason, maxBody, budget.capacity);
    return undefined;
  }
  budget.giveOnClose(ex.res, read.held);
  ex.body = read.body;
  ex.bytesIn = read.body.length;
  return read.body;
}

/**
 * Notes the session of `ex` read from its body as the engine reads it: `body` itself, or decoded
 * per its `Content-Encoding` (decodeForRouting; the original bytes are what is forwarded), and
 * returns that readable body. A refusal (415, 400 or 413 for the encoding, 400 for a `model` that
 * is not a string) is answered here and the result is undefined.
 */
export async function resolveSession(
  ex: Exchange,
  body: Buffer,
  maxBody: number,
  resolve: (body?: Buffer) => ResolvedSession,
): Promise<{ readonly body: Buffer; readonly session: ResolvedSession } | undefined> {
  const coding = ex.req.headers['content-encoding'];
  const d = coding === undefined || body.length === 0 ? { ok: true as const, body } : await decodeForRouting(body, coding, maxBody);
  const session = resolve(d.ok ? d.body : undefined);
  ex.session = session;
  if (!d.ok) return void failExchange(ex, d.code, 'rejected', d.message);
  if (session.modelType !== undefined) return void failExchange(ex, 'invalid_model', 'rejected', `\`model\` must be a string, got ${session.modelType}`);
  return { body: d.body, session };
}
