import http from 'node:http';
import https from 'node:https';
import { setTimeout as delay } from 'node:timers/promises';
import type { ReplicaEndpoint } from '../registry/replica-endpoint.js';

export interface ProbeResult {
  readonly ok: boolean;
  readonly status?: number;
  readonly error?: string;
  /** The error's code (ECONNREFUSED, DEPTH_ZERO_SELF_SIGNED_CERT, ...), for classification. */
  readonly code?: string;
  readonly body?: string;
  readonly ms: number;
}

/** TLS verification failures: the fix is in the config (`ca_file` / `tls_verify`), so say so. */
export const TLS_ERROR_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_SIGNATURE_FAILURE',
]);

/**
 * GET `path` on a replica with a hard deadline; 200 is healthy, anything else is not.
 * Reads at most `maxBody` bytes of the answer (adoption checks the model list).
 */
export function probe(ep: ReplicaEndpoint, path: string, timeoutMs: number, maxBody = 0): Promise<ProbeResult> {
  const started = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: Omit<ProbeResult, 'ms'>): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...r, ms: performance.now() - started });
    };
    const mod = ep.scheme === 'https' ? https : http;
    const req = mod.request(
      { host: ep.host, port: ep.port, path, method: 'GET', agent: ep.probeAgent, headers: { accept: 'application/json' } },
      (res) => {
        const status = res.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          if (size < maxBody) chunks.push(c);
          size += c.length;
        });
        res.on('end', () =>
          done({ ok: status === 200, status, body: maxBody > 0 ? Buffer.concat(chunks).toString('utf8', 0, maxBody) : undefined }),
        );
        res.on('error', (e) => done({ ok: false, status, error: e.message }));
      },
    );
    const timer = setTimeout(() => {
      req.destroy();
      done({ ok: false, error: `no answer within ${timeoutMs} ms`, code: 'ETIMEDOUT' });
    }, timeoutMs);
    req.on('error', (e: NodeJS.ErrnoException) => done({ ok: false, error: e.message, code: e.code }));
    req.end();
  });
}

/**
 * Whether the endpoint still gives any HTTP answer on `path` once `graceMs` passed: probes with a
 * 1 s timeout every 250 ms, false as soon as one gets no answer (after a stop: the process is gone).
 */
export async function answersAfter(ep: ReplicaEndpoint, path: string, graceMs: number): Promise<boolean> {
  const end = performance.now() + graceMs;
  for (;;) {
    if ((await probe(ep, path, 1_000)).status === undefined) return false;
    if (performance.now() >= end) return true;
    await delay(250);
  }
}
