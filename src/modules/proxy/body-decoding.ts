import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate, inflateRaw, type ZlibOptions } from 'node:zlib';

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
export async function decodeForRouting(body: Buffer, header: string, maxBytes: number): Promise<Decoded> {
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
