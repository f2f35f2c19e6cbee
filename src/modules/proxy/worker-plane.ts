import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AppLogger } from '../../common/logging/logger.js';
import { RouterConfig } from '../../config/router-config.js';
import { SystemClock } from '../../common/clock.js';
import { MetricsRegistry } from '../../common/metrics/metrics-registry.js';
import { AffinityService } from '../affinity/affinity.service.js';
import { bodyPromptChain, type PromptChain } from '../affinity/prefix-hash.js';
import { Replica } from '../registry/replica.js';
import { createEndpoint, destroyEndpoint } from '../registry/replica-endpoint.js';
import { BodyReader } from './body-reader.service.js';
import { Exchange } from './exchange.js';
import { ExchangeRelay, type RetryAnswer } from './exchange-relay.js';
import { ProxyMetrics } from './proxy.metrics.js';
import { RequestReader } from './request-reader.js';
import type { RouteRequest } from '../routing/route-request.js';
import {
  FIRST_TURN_MAX_BYTES,
  PLACED_SESSIONS_KEPT,
  type EndRecord,
  type FromWorker,
  type ReplicaAddress,
  type RequestHead,
  type ToWorker,
} from './worker-protocol.js';

/** performance.now() as epoch milliseconds (0 stays 0: a mark not reached). */
const epoch = (mark: number): number => (mark > 0 ? performance.timeOrigin + mark : 0);

/**
 * A worker process's data plane (docs/workers.md): it reads `/v1/` requests as
 * far as their routing keys, asks the primary where each goes (the primary holds the session
 * directory, the prefix index, every replica's fleet-wide in-flight count and the admission
 * queue), relays the exchange on its own keep-alive pools, and reports how it ended. Anything
 * else that reaches it (the admin API, probes, `/metrics`, `GET /v1/models`) is forwarded to the
 * primary's own listener.
 */
export class WorkerPlane extends ExchangeRelay {
  private readonly reader: RequestReader;
  private readonly metrics = new MetricsRegistry();
  private readonly proxyMetrics = new ProxyMetrics(this.metrics);
  private stopping = false;
  private seq = 0;
  /** Requests the primary was asked about, by number: waiting for a grant, or in flight. */
  private readonly asked = new Map<number, Exchange>();
  private readonly numbers = new WeakMap<Exchange, number>();
  private readonly retries = new Map<number, RetryAnswer>();
  /** One table row (endpoint and keep-alive pool) per replica the primary named. */
  private readonly replicas = new Map<string, Replica>();
  private readonly toPrimary = new http.Agent({ keepAlive: true, maxFreeSockets: 64 });
  /** Sessions with an id this worker saw placed (oldest first): their next turns need no prompt chain. */
  private readonly placed = new Set<string>();

  constructor(
    private readonly config: RouterConfig,
    log: AppLogger,
    private readonly primaryPort: number,
    private readonly send: (m: FromWorker) => void,
  ) {
    super(config, log);
    const bodies = new BodyReader(config);
    const affinity = new AffinityService(config, new SystemClock());
    this.reader = new RequestReader(
      affinity,
      bodies,
      () => this.stopping,
      (ex) => (this.forward(ex.req, ex.res), 'answered'),
    );
  }

  /** Every `/v1/` request but the model list, which the primary serves from the lists it holds. */
  serve(req: IncomingMessage, res: ServerResponse): void {
    const ex = new Exchange(req, res);
    this.traceArrival(ex);
    this.numbers.set(ex, ++this.seq);
    this.handle(ex).catch((err: unknown) => this.internalError(ex, err));
  }

  /** A message of the primary. */
  receive(m: ToWorker): void {
    switch (m.t) {
      case 'grant': {
        const ex = this.asked.get(m.n);
        if (ex === undefined || ex.closed) return;
        if (ex.session !== undefined && ex.session.source !== 'minted') this.remember(ex.session.id);
        this.start(ex, m.outcome, this.replica(m.replica));
        return;
      }
      case 'refuse': {
        const ex = this.asked.get(m.n);
        if (ex !== undefined && !ex.closed) this.reader.answer(ex, undefined, m.refused);
        return;
      }
      case 'retried': {
        const answer = this.retries.get(m.n);
        this.retries.delete(m.n);
        answer?.(m.replica === undefined ? undefined : this.replica(m.replica));
        return;
      }
      case 'body?': {
        // Decoded: routing reads the prompt, and the bytes as received may be compressed.
        const ex = this.asked.get(m.n);
        const body = ex?.request?.body;
        if (ex !== undefined && body !== undefined && !ex.closed) this.send({ t: 'body', n: m.n, body });
        return;
      }
      case 'abort':
        this.asked.get(m.n)?.abort(m.reason);
        return;
      case 'stopping':
        this.stopping = true;
        return;
      case 'metrics?':
        this.metrics.registry.getMetricsAsJSON().then(
          (metrics) => this.send({ t: 'metrics', id: m.id, metrics }),
          (err: unknown) => this.log.error({ err }, 'could not read the worker metrics'),
        );
        return;
      default:
        return;
    }
  }

  /** Requests in flight or waiting (the worker exits once none is left). */
  get busy(): number {
    return this.asked.size;
  }

  /** Anything but the data plane: the primary answers it (same method, path, headers and body). */
  forward(req: IncomingMessage, res: ServerResponse): void {
    const up = http.request({ host: '127.0.0.1', port: this.primaryPort, method: req.method, path: req.url, headers: req.headers, agent: this.toPrimary });
    up.once('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, answer.headers);
      answer.pipe(res);
    });
    up.on('error', (err) => {
      if (res.headersSent) return void res.destroy();
      res.writeHead(502, { 'content-type': 'application/problem+json', connection: 'close' });
      res.end(
        JSON.stringify({ type: 'about:blank', status: 502, title: 'Bad Gateway', detail: `the router's primary process did not answer: ${err.message}` }),
      );
    });
    res.once('close', () => up.destroy());
    req.pipe(up);
  }

  private async handle(ex: Exchange): Promise<void> {
    ex.onAbort = (reason) => this.aborted(ex, reason);
    ex.res.on('close', () => this.closed(ex));
    const read = await this.reader.read(ex);
    if (read === undefined || ex.closed) return;
    const n = this.numbers.get(ex)!;
    this.asked.set(n, ex);
    const warm = this.config.routing.warmHandoff;
    const firstTurn = this.firstTurn(read.request);
    this.send({ t: 'route', n, head: headOf(ex, warm), arrived: epoch(ex.arrivedAt), keys: read.keys, body: warm ? ex.body : undefined, firstTurn });
  }

  /**
   * The prompt chain of a request with an id whose session this worker has not seen placed: if it
   * is a first turn, the primary places it by its prompt with no `body?` round trip. Not read for a
   * session placed here before (its pin decides), nor for a large body (asked for when needed).
   */
  private firstTurn(req: RouteRequest): PromptChain | undefined {
    const { policy, prefixAffinity } = this.config.routing;
    const body = req.body;
    if (policy !== 'affinity' || !prefixAffinity || body === undefined || body.length > FIRST_TURN_MAX_BYTES || this.placed.has(req.sessionId))
      return undefined;
    return bodyPromptChain(body);
  }

  private remember(sessionId: string): void {
    if (this.placed.has(sessionId)) return;
    if (this.placed.size >= PLACED_SESSIONS_KEPT) this.placed.delete(this.placed.values().next().value!);
    this.placed.add(sessionId);
  }

  private replica(a: ReplicaAddress): Replica {
    const known = this.replicas.get(a.name);
    if (known !== undefined && known.url === a.url) return known;
    if (known !== undefined) destroyEndpoint(known.endpoint);
    const endpoint = createEndpoint({ scheme: a.scheme, host: a.host, port: a.port, caFile: a.caFile, tlsVerify: a.tlsVerify });
    const r = new Replica(a.name, 'static', endpoint, null, { ready: true });
    this.replicas.set(a.name, r);
    return r;
  }

  protected upstreamFailed(r: Replica, message: string): void {
    this.send({ t: 'health', replica: r.name, kind: 'upstream', message, code: undefined });
  }

  protected connectFailed(r: Replica, message: string, code: string | undefined): void {
    this.send({ t: 'health', replica: r.name, kind: 'connect', message, code });
  }

  protected retryTarget(ex: Exchange, failed: Replica, staleReuse: boolean, signal: boolean, err: NodeJS.ErrnoException, answer: RetryAnswer): void {
    const n = this.numbers.get(ex)!;
    this.retries.set(n, answer);
    this.send({ t: 'retry', n, failed: failed.name, staleReuse, signal, message: err.message, code: err.code });
  }

  protected released(ex: Exchange): void {
    ex.vacate();
  }

  protected chunkGap(seconds: number): void {
    this.proxyMetrics.chunkGap(seconds);
  }

  protected finished(ex: Exchange): void {
    ex.vacate();
    const n = this.numbers.get(ex)!;
    const routed = this.asked.delete(n);
    this.retries.delete(n);
    this.send({ t: 'end', n, head: routed ? undefined : headOf(ex), record: recordOf(ex) });
  }

  /** A throw in handle(): a router bug, answered 500 (the primary counts it from the end record). */
  private internalError(ex: Exchange, err: unknown): void {
    this.log.error(
      { event: 'internal_error', source: 'data_plane', reqId: ex.id, method: ex.req.method, path: ex.req.url, err },
      'internal error while handling a request',
    );
    ex.failInternal();
  }
}

/** The request's head for the primary; its headers only when a warm copy may replay them. */
function headOf(ex: Exchange, withHeaders = false): RequestHead {
  const req = ex.req;
  const head = { id: ex.id, method: req.method, url: req.url, remoteAddress: req.socket.remoteAddress };
  return withHeaders ? { ...head, headers: req.headers } : head;
}

function recordOf(ex: Exchange): EndRecord {
  const at = ex.at;
  return {
    session: ex.session,
    model: ex.request?.model,
    outcome: ex.outcome,
    status: ex.status,
    cause: ex.cause ?? 'ok',
    detail: ex.detail,
    bytesIn: ex.bytesIn,
    bytesOut: ex.bytesOut,
    attempts: ex.attempts,
    stream: ex.stream,
    marks: {
      arrived: epoch(ex.arrivedAt),
      upstreamWritten: epoch(at.upstreamWritten),
      upstreamFirstByte: epoch(at.upstreamFirstByte),
      clientFirstByte: epoch(at.clientFirstByte),
      firstChunk: epoch(at.firstChunk),
      lastChunk: epoch(at.lastChunk),
    },
  };
}
