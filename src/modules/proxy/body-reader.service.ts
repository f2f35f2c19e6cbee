import { Inject, Injectable } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RouterConfig } from '../../config/router-config.js';
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate, inflateRaw, type ZlibOptions } from 'node:zlib';

/**
 * Reads request bodies within `--max-body` each and the router-wide budget of body bytes held in
 * memory at once (`--body-memory`, contract §3).
 * A body with a declared length takes its whole size before a byte is read; a chunked body takes
 * each chunk as it arrives. A body that does not fit is refused (503 `overloaded`); bodies already
 * taken are never dropped. A body is given back when its exchange ends (the exchange holds the
 * bytes until then, for a retry on another replica).
 */
@Injectable()
export class BodyReader {
  readonly capacity: number;
  readonly maxBytes: number;
  private held = 0;

  constructor(@Inject(RouterConfig) config: RouterConfig) {
    this.capacity = config.bodyMemoryBytes;
    this.maxBytes = config.maxBodyBytes;
  }

  /**
   * The body of `req` (see readBody), refused over `--max-body` or when it does not fit in the
   * budget, and `plain`, the bytes the engine will read: the body itself, or decoded per its
   * `Content-Encoding` (see decodeForRouting; the original bytes are what is forwarded). Its share
   * of the budget is given back when `res` closes.
   */
  readAll(req: IncomingMessage, res: ServerResponse): Promise<BodyResult> {
    return readBody(req, this.maxBytes, this, (body, held) => {
      this.giveOnClose(res, held);
      const coding = req.headers['content-encoding'];
      if (coding === undefined || body.length === 0) return { ok: true, body, plain: body };
      return decodeForRouting(body, coding, this.maxBytes).then((d): BodyResult =>
        d.ok ? { ok: true, body, plain: d.body } : { ok: false, reason: 'undecodable', code: d.code, message: d.message },
      );
    });
  }

  /** Bytes currently taken. */
  get inUse(): number {
    return this.held;
  }

  /** Take `n` bytes; false (and nothing taken) when they would exceed the budget. */
  take(n: number): boolean {
    if (this.held + n > this.capacity) return false;
    this.held += n;
    return true;
  }

  /** Give `n` bytes back when `res` closes (at once if it already has). */
  giveOnClose(res: ServerResponse, n: number): void {
    if (n === 0) return;
    if (res.closed) this.give(n);
    else res.on('close', () => this.give(n));
  }

  give(n: number): void {
    this.held = Math.max(0, this.held - n);
  }
}

export type BodyResult =
  | { readonly ok: true; readonly body: Buffer; readonly plain: Buffer }
  | { readonly ok: false; readonly reason: 'too_large' | 'over_budget' | 'aborted' }
  | { readonly ok: false; readonly reason: 'undecodable'; readonly code: Undecodable['code']; readonly message: string };

type Undecodable = Extract<Decoded, { ok: false }>;

const EMPTY = Buffer.alloc(0);

/**
 * Buffers a request body up to `maxBytes` within the router's body memory budget (the data plane
 * answers `/v1/` on the HTTP server before Fastify sees the request, so Fastify's bodyLimit does
 * not apply). A declared Content-Length over the cap, or over what is left of the budget, is
 * refused before reading a byte; otherwise the body is read into one buffer of that length (no
 * second copy). A chunked body is refused the moment it crosses the cap or the budget. On any
 * refusal or abort, whatever was taken from the budget is given back.
 */
function readBody(
  req: IncomingMessage,
  maxBytes: number,
  budget: BodyReader,
  received: (body: Buffer, held: number) => BodyResult | Promise<BodyResult>,
): Promise<BodyResult> {
  const header = req.headers['content-length'];
  const declared = header === undefined ? undefined : Number(header);
  if (declared !== undefined && declared > maxBytes) return Promise.resolve({ ok: false, reason: 'too_large' });
  if (req.readableEnded || declared === 0) return Promise.resolve(received(EMPTY, 0));
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
      resolve(received(body, held));
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

const DECODERS: Readonly<Record<string, (b: Buffer, o: ZlibOptions) => Promise<Buffer>>> = {
  gzip: promisify(gunzip),
  'x-gzip': promisify(gunzip),
  br: promisify(brotliDecompress),
  // `deflate` means zlib-wrapped, but some clients send raw deflate: try both, as browsers do.
  deflate: (b, o) => promisify(inflate)(b, o).catch(() => promisify(inflateRaw)(b, o)),
};

export type Decoded =
  | { readonly ok: true; readonly body: Buffer }
  | { readonly ok: false; readonly code: 'unsupported_encoding' | 'invalid_body' | 'body_too_large'; readonly message: string };

/**
 * The body as the engine will read it, for routing only (the original bytes are forwarded with
 * their `Content-Encoding`): `gzip`, `deflate` and `br`, applied in the header's order, decoded
 * off the event loop and never beyond `maxBytes` (a small bomb cannot grow past the body budget);
 * `identity` is plain. An unknown coding is refused (415), corrupt data or an over-large result too
 * (400, 413), each naming what is wrong.
 */
async function decodeForRouting(body: Buffer, header: string, maxBytes: number): Promise<Decoded> {
  const codings = header
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  for (const c of codings) {
    if (DECODERS[c] === undefined) {
      return {
        ok: false,
        code: 'unsupported_encoding',
        message: `the request body's Content-Encoding '${c.replace(/[^\w.+-]/g, '?').slice(0, 40)}' is not supported (gzip, deflate, br or identity)`,
      };
    }
  }
  let out = body;
  for (const c of codings.reverse()) {
    try {
      out = await DECODERS[c](out, { maxOutputLength: maxBytes });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
        return { ok: false, code: 'body_too_large', message: `the request body decodes to more than the router accepts (${maxBytes} bytes)` };
      }
      return { ok: false, code: 'invalid_body', message: `the request body is not valid ${c} data: ${(e as Error).message}` };
    }
  }
  return { ok: true, body: out };
}
