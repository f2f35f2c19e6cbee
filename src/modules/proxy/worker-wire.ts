import type { IncomingHttpHeaders } from 'node:http';
import type { PromptChain } from '../affinity/prefix-hash.js';
import type { SessionSource } from '../affinity/session-id.js';
import { outcomeNamed, type RouteOutcome } from '../routing/routing.policy.js';
import type { TerminationCause } from './exchange.js';
import type { FromWorker, ReplicaAddress, RequestHead, ToWorker } from './worker-protocol.js';

/*
 * How the three messages every request sends travel over the IPC channel: `route` and `end` from
 * the worker, `grant` from the primary, each as one array of its fields. The channel's serialiser
 * writes every key of a keyed object as a string and reads it back; these three were most of the
 * primary's IPC time, which was a fifth of its CPU per request (bench/RESULTS.md, "Per-request
 * messages as arrays"). Every other message travels as it is.
 */

type RouteWire = readonly [
  t: 'R',
  n: number,
  arrived: number,
  id: string,
  method: string | undefined,
  url: string | undefined,
  remoteAddress: string | undefined,
  headers: IncomingHttpHeaders | undefined,
  sessionId: string,
  source: SessionSource,
  replaced: boolean,
  model: string | undefined,
  prefix: PromptChain | undefined,
  body: Uint8Array | undefined,
  firstTurn: PromptChain | undefined,
];

type EndWire = readonly [
  t: 'E',
  n: number,
  head: RequestHead | undefined,
  sessionId: string | undefined,
  source: SessionSource | undefined,
  replaced: boolean,
  model: string | undefined,
  kind: RouteOutcome['kind'],
  reason: RouteOutcome['reason'],
  status: number,
  cause: TerminationCause,
  detail: string | undefined,
  bytesIn: number,
  bytesOut: number,
  attempts: number,
  stream: boolean,
  arrived: number,
  upstreamWritten: number,
  upstreamFirstByte: number,
  clientFirstByte: number,
  firstChunk: number,
  lastChunk: number,
];

type GrantWire = readonly [
  t: 'G',
  n: number,
  kind: RouteOutcome['kind'],
  reason: RouteOutcome['reason'],
  name: string,
  url: string,
  scheme: ReplicaAddress['scheme'],
  host: string,
  port: number,
  caFile: string | undefined,
  tlsVerify: boolean | undefined,
];

export type FromWorkerWire = RouteWire | EndWire | Exclude<FromWorker, { t: 'route' | 'end' }>;
export type ToWorkerWire = GrantWire | Exclude<ToWorker, { t: 'grant' }>;

/** A worker's message as it is sent. */
export function fromWorkerWire(m: FromWorker): FromWorkerWire {
  if (m.t === 'route') {
    const { head, keys } = m;
    const s = keys.session;
    return [
      'R',
      m.n,
      m.arrived,
      head.id,
      head.method,
      head.url,
      head.remoteAddress,
      head.headers,
      s.id,
      s.source,
      s.replaced,
      keys.model,
      keys.prefix,
      m.body,
      m.firstTurn,
    ];
  }
  if (m.t !== 'end') return m;
  const r = m.record;
  const s = r.session;
  const k = r.marks;
  return [
    'E',
    m.n,
    m.head,
    s?.id,
    s?.source,
    s?.replaced ?? false,
    r.model,
    r.outcome.kind,
    r.outcome.reason,
    r.status,
    r.cause,
    r.detail,
    r.bytesIn,
    r.bytesOut,
    r.attempts,
    r.stream,
    k.arrived,
    k.upstreamWritten,
    k.upstreamFirstByte,
    k.clientFirstByte,
    k.firstChunk,
    k.lastChunk,
  ];
}

/** A worker's message as it was sent. */
export function fromWorkerMessage(w: FromWorkerWire): FromWorker {
  if (Array.isArray(w)) return w[0] === 'R' ? routeOf(w as RouteWire) : endOf(w as EndWire);
  return w as Exclude<FromWorkerWire, RouteWire | EndWire>;
}

/** A message to a worker as it is sent. */
export function toWorkerWire(m: ToWorker): ToWorkerWire {
  if (m.t !== 'grant') return m;
  const a = m.replica;
  return ['G', m.n, m.outcome.kind, m.outcome.reason, a.name, a.url, a.scheme, a.host, a.port, a.caFile, a.tlsVerify];
}

/** A message to a worker as it was sent. */
export function toWorkerMessage(w: ToWorkerWire): ToWorker {
  if (!Array.isArray(w)) return w as Exclude<ToWorkerWire, GrantWire>;
  const [, n, kind, reason, name, url, scheme, host, port, caFile, tlsVerify] = w as GrantWire;
  return { t: 'grant', n, outcome: outcomeNamed(kind, reason), replica: { name, url, scheme, host, port, caFile, tlsVerify } };
}

function routeOf(w: RouteWire): FromWorker {
  const [, n, arrived, id, method, url, remoteAddress, headers, sessionId, source, replaced, model, prefix, body, firstTurn] = w;
  const head: RequestHead = headers === undefined ? { id, method, url, remoteAddress } : { id, method, url, remoteAddress, headers };
  const session = { id: sessionId, source, replaced };
  return { t: 'route', n, head, arrived, keys: { session, prefix, model }, body, firstTurn };
}

function endOf(w: EndWire): FromWorker {
  const [
    ,
    n,
    head,
    sessionId,
    source,
    replaced,
    model,
    kind,
    reason,
    status,
    cause,
    detail,
    bytesIn,
    bytesOut,
    attempts,
    stream,
    arrived,
    upstreamWritten,
    upstreamFirstByte,
    clientFirstByte,
    firstChunk,
    lastChunk,
  ] = w;
  const session = sessionId === undefined || source === undefined ? undefined : { id: sessionId, source, replaced };
  const outcome = outcomeNamed(kind, reason);
  const record = {
    session,
    model,
    outcome,
    status,
    cause,
    detail,
    bytesIn,
    bytesOut,
    attempts,
    stream,
    marks: { arrived, upstreamWritten, upstreamFirstByte, clientFirstByte, firstChunk, lastChunk },
  };
  return { t: 'end', n, head, record };
}
