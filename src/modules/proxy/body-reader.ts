import type { IncomingMessage } from 'node:http';

export type BodyResult = { readonly ok: true; readonly body: Buffer } | { readonly ok: false; readonly reason: 'too_large' | 'aborted' };

const EMPTY = Buffer.alloc(0);

/**
 * Buffers a request body up to `maxBytes` (the data plane answers `/v1/` on the HTTP server before
 * Fastify sees the request, so Fastify's bodyLimit does not apply). A declared Content-Length over
 * the cap is refused before reading a byte; a chunked body is refused the moment it crosses the cap.
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<BodyResult> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBytes) return Promise.resolve({ ok: false, reason: 'too_large' });
  if (req.readableEnded) return Promise.resolve({ ok: true, body: EMPTY });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onAbort);
      req.off('close', onClose);
    };
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size > maxBytes) {
        cleanup();
        req.pause();
        resolve({ ok: false, reason: 'too_large' });
        return;
      }
      chunks.push(c);
    };
    const onEnd = (): void => {
      cleanup();
      resolve({ ok: true, body: chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size) });
    };
    const onAbort = (): void => {
      cleanup();
      resolve({ ok: false, reason: 'aborted' });
    };
    const onClose = (): void => {
      if (!req.readableEnded) onAbort();
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onAbort);
    req.on('close', onClose);
  });
}
