import http from 'node:http';
import https from 'node:https';
import type { Replica } from '../registry/replica.js';
import type { Exchange } from './exchange.js';
import { sendRouterError } from './router-error.js';

interface ModelsAnswer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

/** GET /v1/models on one replica, bounded by `timeoutMs` from start to the last byte. */
function fetchModels(r: Replica, path: string, timeoutMs: number, ex: Exchange): Promise<ModelsAnswer | undefined> {
  return new Promise((resolve) => {
    const ep = r.endpoint;
    const mod = ep.scheme === 'https' ? https : http;
    const req = mod.request(
      {
        host: ep.host,
        port: ep.port,
        path,
        method: 'GET',
        agent: ep.probeAgent,
        headers: { accept: 'application/json', 'x-request-id': ex.id, ...(ex.session ? { 'x-session-id': ex.session.id } : {}) },
        signal: AbortSignal.timeout(timeoutMs),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', () => resolve(undefined));
      },
    );
    req.on('error', () => resolve(undefined));
    ex.res.once('close', () => req.destroy());
    req.end();
  });
}

/**
 * `GET /v1/models` (SPEC §3): routable replicas in table order, each bounded by the models timeout;
 * the first 200 is relayed as received; none → 503. Never hangs.
 */
export async function relayModels(ex: Exchange, table: readonly Replica[], timeoutMs: number): Promise<void> {
  // The client's query string goes along (SPEC §3); only the path was matched.
  const path = ex.req.url ?? '/v1/models';
  for (const r of table.filter((x) => x.routable)) {
    if (ex.res.destroyed) return void ex.end('client_abort');
    const a = await fetchModels(r, path, timeoutMs, ex);
    if (a === undefined || a.status !== 200) continue;
    ex.replica = r;
    ex.status = 200;
    ex.bytesOut = a.body.length;
    ex.end('ok');
    ex.res.statusCode = 200;
    const ct = a.headers['content-type'];
    if (ct !== undefined) ex.res.setHeader('content-type', ct);
    for (const [k, v] of Object.entries(ex.routerHeaders())) ex.res.setHeader(k, v);
    ex.res.setHeader('content-length', a.body.length);
    ex.res.end(a.body);
    return;
  }
  ex.end('no_replica');
  sendRouterError(ex.res, 'no_replica_available', ex.routerHeaders());
}
