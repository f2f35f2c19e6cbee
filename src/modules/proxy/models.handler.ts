import type http from 'node:http';
import type { Replica } from '../registry/replica.js';
import { requestTo } from '../registry/replica-endpoint.js';
import type { Exchange } from './exchange.js';
import { sendRouterError } from './router-error.js';

interface ModelsAnswer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

/** GET /v1/models on one replica, bounded by `timeoutMs` from start to the last byte. */
function fetchModels(r: Replica, path: string, timeoutMs: number, ex: Exchange, gone: AbortSignal): Promise<ModelsAnswer | undefined> {
  return new Promise((resolve) => {
    const ep = r.endpoint;
    const req = requestTo(
      ep,
      {
        path,
        method: 'GET',
        agent: ep.probeAgent,
        headers: { accept: 'application/json', 'x-request-id': ex.id, ...(ex.session ? { 'x-session-id': ex.session.id } : {}) },
        signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), gone]),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', () => resolve(undefined));
      },
    );
    req.on('error', () => resolve(undefined));
    req.end();
  });
}

/** The `data` entries of a `/v1/models` answer, or undefined when it is not an OpenAI model list. */
function modelEntries(a: ModelsAnswer | undefined): Array<Record<string, unknown>> | undefined {
  if (a === undefined || a.status !== 200) return undefined;
  try {
    const doc: unknown = JSON.parse(a.body.toString('utf8'));
    const data = typeof doc === 'object' && doc !== null ? (doc as { data?: unknown }).data : undefined;
    if (!Array.isArray(data)) return undefined;
    return data.filter((m): m is Record<string, unknown> => typeof m === 'object' && m !== null && typeof (m as { id?: unknown }).id === 'string');
  } catch {
    return undefined;
  }
}

/**
 * `GET /v1/models` (SPEC §3, §4.3): every routable replica is asked at once, each bounded by the
 * models timeout, and the answer is the union of their lists, deduplicated by `id` (the first
 * replica in table order that lists an id gives its entry, LoRA `parent` included), in the OpenAI
 * list shape. None answering a model list → 503. Never hangs.
 */
export async function relayModels(ex: Exchange, table: readonly Replica[], timeoutMs: number): Promise<void> {
  // The client's query string goes along (SPEC §3); only the path was matched.
  const path = ex.req.url ?? '/v1/models';
  const asked = table.filter((x) => x.routable);
  // One listener for the client's departure, however many replicas are asked.
  const gone = new AbortController();
  ex.res.once('close', () => gone.abort());
  const answers = await Promise.all(asked.map((r) => fetchModels(r, path, timeoutMs, ex, gone.signal)));
  if (ex.res.destroyed) return void ex.end('client_abort');
  const byId = new Map<string, Record<string, unknown>>();
  let answered = 0;
  for (const [i, a] of answers.entries()) {
    const entries = modelEntries(a);
    if (entries === undefined) continue;
    // One replica's list alone: that replica answered (X-Router-Replica); several: none of them did.
    ex.replica = answered++ === 0 ? asked[i] : undefined;
    for (const m of entries) if (!byId.has(m.id as string)) byId.set(m.id as string, m);
  }
  if (answered === 0) {
    ex.end('no_replica');
    return sendRouterError(ex.res, 'no_replica_available', ex.routerHeaders());
  }
  const body = Buffer.from(JSON.stringify({ object: 'list', data: [...byId.values()] }));
  ex.status = 200;
  ex.bytesOut = body.length;
  ex.end('ok');
  ex.res.statusCode = 200;
  ex.res.setHeader('content-type', 'application/json');
  for (const [k, v] of Object.entries(ex.routerHeaders())) ex.res.setHeader(k, v);
  ex.res.setHeader('content-length', body.length);
  ex.res.end(body);
}
