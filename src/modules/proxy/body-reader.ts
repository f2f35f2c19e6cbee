import type { IncomingMessage } from 'node:http';
import type { BodyBudget } from './body-budget.service.js';

export type BodyResult =
  | { readonly ok: true; readonly body: Buffer; /** bytes taken from the budget, to give back when the exchange ends */ readonly held: number }
  | { readonly ok: false; readonly reason: 'too_large' | 'over_budget' | 'aborted' };

const EMPTY = Buffer.alloc(0);

/**
 * Buffers a request body up to `maxBytes` within the router's body memory budget (the data plane
 * answers `/v1/` on the HTTP server before Fastify sees the request, so Fastify's bodyLimit does
 * not apply). A declared Content-Length over the cap, or over what is left of the budget, is
 * refused before reading a byte; otherwise the body is read into one buffer of that length (no
 * second copy). A chunked body is refused the moment it crosses the cap or the budget. On any
 * refusal or abort, whatever was taken from the budget is given back.
 */
export function readBody(req: IncomingMessage, maxBytes: number, budget: BodyBudget): Promise<BodyResult> {
  const header = req.headers['content-length'];
  const declared = header === undefined ? undefined : Number(header);
  if (declared !== undefined && declared > maxBytes) return Promise.resolve({ ok: false, reason: 'too_large' });
  if (req.readableEnded || declared === 0) return Promise.resolve({ ok: true, body: EMPTY, held: 0 });
  if (declared !== undefined && !budget.take(declared)) return Promise.resolve({ ok: false, reason: 'over_budget' });
  return new Promise((resolve) => {
    // Node's parser delivers exactly Content-Length bytes (it rejects any other framing).
    const whole = declared !== undefined ? Buffer.allocUnsafe(declared) : undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    let held = declared ?? 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onAbort);
      req.off('close', onClose);
    };
    const refuse = (reason: 'too_large' | 'over_budget' | 'aborted'): void => {
      cleanup();
      budget.give(held);
      if (reason !== 'aborted') req.pause();
      resolve({ ok: false, reason });
    };
    const onData = (c: Buffer): void => {
      if (size + c.length > maxBytes) return refuse('too_large');
      if (whole !== undefined) {
        c.copy(whole, size);
      } else {
        if (!budget.take(c.length)) return refuse('over_budget');
        held += c.length;
        chunks.push(c);
      }
      size += c.length;
    };
    const onEnd = (): void => {
      cleanup();
      const body = whole !== undefined ? whole.subarray(0, size) : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
      resolve({ ok: true, body, held });
    };
    const onAbort = (): void => refuse('aborted');
    const onClose = (): void => {
      if (!req.readableEnded) onAbort();
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onAbort);
    req.on('close', onClose);
  });
}
