import { setTimeout as delay } from 'node:timers/promises';
import { requestTo, type ReplicaEndpoint } from '../registry/replica-endpoint.js';

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

/** The deadline clock's tick; a gap longer than two ticks is the router stalled, not the replica slow. */
const AWAKE_TICK_MS = 100;
/** However stalled the router, a probe ends within this many times its timeout of wall time. */
const WALL_CAP = 4;

/**
 * Call `onExpire` once the router has been able to run for `timeoutMs` (contract §5: a probe's
 * timeout). Time the router's own event loop was stalled (a CPU-starved host, a long GC) counts as
 * two ticks at most: a replica must not be demoted because the router could not read its answer,
 * which is what happened to all four replicas at once in the production-shaped bench. Wall time is
 * capped at WALL_CAP × timeoutMs. Returns the cancel function.
 */
export function awakeDeadline(timeoutMs: number, onExpire: () => void): () => void {
  const startedAt = performance.now();
  let last = startedAt;
  let awake = 0;
  const tick = setInterval(
    () => {
      const now = performance.now();
      awake += Math.min(now - last, 2 * AWAKE_TICK_MS);
      last = now;
      if (awake >= timeoutMs || now - startedAt >= WALL_CAP * timeoutMs) {
        clearInterval(tick);
        onExpire();
      }
    },
    Math.min(AWAKE_TICK_MS, timeoutMs),
  );
  return () => clearInterval(tick);
}

/**
 * GET `path` on a replica with a deadline of `timeoutMs` of the router's running time (see
 * awakeDeadline); 200 is healthy, anything else is not.
 * Reads at most `maxBody` bytes of the answer (adoption and model discovery read the model list).
 */
export function probe(ep: ReplicaEndpoint, path: string, timeoutMs: number, maxBody = 0, headers: Readonly<Record<string, string>> = {}): Promise<ProbeResult> {
  const started = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: Omit<ProbeResult, 'ms'>): void => {
      if (settled) return;
      settled = true;
      cancel();
      resolve({ ...r, ms: performance.now() - started });
    };
    const req = requestTo(ep, { path, method: 'GET', agent: ep.probeAgent, headers: { accept: 'application/json', ...headers } }, (res) => {
      const status = res.statusCode ?? 0;
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        if (size < maxBody) chunks.push(c);
        size += c.length;
      });
      res.on('end', () => done({ ok: status === 200, status, body: maxBody > 0 ? Buffer.concat(chunks).toString('utf8', 0, maxBody) : undefined }));
      res.on('error', (e) => done({ ok: false, status, error: e.message }));
    });
    const cancel = awakeDeadline(timeoutMs, () => {
      // What has arrived is read first (the poll phase runs before setImmediate's check phase).
      setImmediate(() => {
        if (settled) return;
        req.destroy();
        done({ ok: false, error: `no answer within ${timeoutMs} ms`, code: 'ETIMEDOUT' });
      });
    });
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
