import type { ResolvedSession } from '../affinity/session-id.js';
import type { BodyBudget } from './body-budget.js';
import { readBody } from './body-reader.js';
import type { Exchange } from './exchange.js';
import { refuseBody } from './exchange-end.js';

/**
 * Reads the body of `ex` within `--max-body` and the body memory budget (SPEC §3) and notes it on
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
