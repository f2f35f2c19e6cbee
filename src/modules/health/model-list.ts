import type { ReplicaEndpoint } from '../registry/replica-endpoint.js';
import { requestTo } from '../registry/replica-endpoint.js';

import type { ModelEntry } from '../registry/model-entry.js';

export type { ModelEntry };

/** A replica's model list read, or why it could not be. */
export type ModelListRead = { readonly ok: true; readonly entries: readonly ModelEntry[] } | { readonly ok: false; readonly reason: string };

/** The entries of an OpenAI model list (`{"data": [{"id"}, ...]}`), or undefined when the text is not one. */
export function parseModelList(text: string): ModelEntry[] | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  const data = typeof doc === 'object' && doc !== null ? (doc as { data?: unknown }).data : undefined;
  if (!Array.isArray(data)) return undefined;
  return data.filter(
    (m): m is ModelEntry => typeof m === 'object' && m !== null && typeof (m as { id?: unknown }).id === 'string' && (m as { id: string }).id !== '',
  );
}

/**
 * `GET /v1/models` on the probe's own connection, bounded in time (`timeoutMs`, first byte to
 * last) and in size: an answer longer than `maxBytes` is abandoned as soon as it crosses the cap,
 * never buffered whole. The one fetcher of model lists (discovery, adoption).
 */
export function fetchModelList(
  ep: ReplicaEndpoint,
  timeoutMs: number,
  maxBytes: number,
  headers: Readonly<Record<string, string>> = {},
): Promise<ModelListRead> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: ModelListRead): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    const req = requestTo(ep, { path: '/v1/models', method: 'GET', agent: ep.probeAgent, headers: { accept: 'application/json', ...headers } }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return done({ ok: false, reason: `status ${res.statusCode}` });
      }
      const declared = Number(res.headers['content-length']);
      if (declared > maxBytes) {
        req.destroy();
        return done({ ok: false, reason: `the list is ${declared} bytes, over --models-max-bytes ${maxBytes}` });
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > maxBytes) {
          req.destroy();
          return done({ ok: false, reason: `the list is over --models-max-bytes ${maxBytes} bytes` });
        }
        chunks.push(c);
      });
      res.on('end', () => {
        const entries = parseModelList(Buffer.concat(chunks).toString('utf8'));
        done(entries === undefined ? { ok: false, reason: 'the answer is not an OpenAI model list' } : { ok: true, entries });
      });
      res.on('error', (e) => done({ ok: false, reason: e.message }));
    });
    const timer = setTimeout(() => {
      req.destroy();
      done({ ok: false, reason: `no complete answer within ${timeoutMs} ms` });
    }, timeoutMs);
    req.on('error', (e) => done({ ok: false, reason: e.message }));
    req.end();
  });
}
