import { Injectable } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RouterConfig } from '../../config/router-config.js';
import { InternalErrors } from '../../common/errors/internal-errors.js';
import { HealthService } from '../health/health.service.js';
import { RegistryService } from '../registry/registry.service.js';
import type { Replica } from '../registry/replica.js';
import { AdmissionService, type Routed } from '../routing/admission.service.js';
import type { Refusal } from '../routing/route-request.js';
import { outcomeOf, switched } from '../routing/routing.policy.js';
import { RoutingService } from '../routing/routing.service.js';
import { Exchange } from './exchange.js';
import { ExchangeObserver } from './exchange.observer.js';
import { RequestIntake } from './request-intake.service.js';
import { noReplica, queueFull, queueRefusal, type Refused } from './request-reader.js';
import { WarmCopies } from './warm-copy.service.js';
import type { EndRecord, FromWorker, ReplicaAddress, RequestHead, ToWorker } from './worker-protocol.js';

/** One worker process as the primary's exchanges see it: where answers go. */
export interface WorkerLink {
  readonly index: number;
  send(m: ToWorker): void;
}

/** A worker's request the primary knows of: placed (counted on its replica) or waiting in the queue. */
interface Remote {
  readonly ex: Exchange;
  readonly link: WorkerLink;
  readonly n: number;
  /** Waiting for the body the worker was asked for (`body?`). */
  bodyWanted?: (body: Buffer) => void;
}

/** The response side of a worker's exchange as the primary holds it: nothing is written here. */
const NO_RESPONSE = { headersSent: false, destroyed: true, writableEnded: true, statusCode: 0 } as unknown as ServerResponse;

/** performance.now() of an epoch mark sent by a worker (0 stays 0). */
const local = (epochMs: number): number => (epochMs > 0 ? epochMs - performance.timeOrigin : 0);

/**
 * The primary's side of the worker processes' requests (docs/workers.md). A
 * worker asks where a request goes; the answer comes from the same tables, policy, admission
 * queue and counts as the primary's own requests, so pins, the load override, least load and
 * `max_inflight` see every worker's traffic at once. Each request a worker places is held here as
 * an {@link Exchange} (counted on its replica: a drain waits for it or cuts it) until the worker
 * reports its end, which is then observed as the primary's own are (metrics, request log, speed).
 */
@Injectable()
export class RemoteExchanges {
  private readonly live = new Map<WorkerLink, Map<number, Remote>>();
  private readonly addresses = new WeakMap<Replica, ReplicaAddress>();

  constructor(
    private readonly config: RouterConfig,
    private readonly intake: RequestIntake,
    private readonly routing: RoutingService,
    private readonly admission: AdmissionService,
    private readonly health: HealthService,
    private readonly registry: RegistryService,
    private readonly observer: ExchangeObserver,
    private readonly warm: WarmCopies,
    private readonly internalErrors: InternalErrors,
  ) {}

  /** A message from `link`'s worker. */
  receive(link: WorkerLink, m: FromWorker): void {
    switch (m.t) {
      case 'route':
        return void this.routeForWorker(link, m).catch((err: unknown) => this.failed(link, m.n, err));
      case 'retry':
        return this.retry(link, m);
      case 'health': {
        const r = this.registry.get(m.replica);
        if (r === undefined) return;
        if (m.kind === 'upstream') this.health.upstreamFailed(r, m.message);
        else this.health.connectFailed(r, m.message, m.code);
        return;
      }
      case 'body': {
        const held = this.live.get(link)?.get(m.n);
        const wanted = held?.bodyWanted;
        if (held === undefined || wanted === undefined) return;
        held.bodyWanted = undefined;
        return wanted(bytes(m.body));
      }
      case 'end':
        return this.endForWorker(link, m.n, m.head, m.record);
      default:
        return;
    }
  }

  /** Requests of `link` the primary holds (placed or queued). */
  inflight(link: WorkerLink): number {
    return this.live.get(link)?.size ?? 0;
  }

  /**
   * `link`'s worker process exited: its clients' connections closed with it (a started stream
   * ends without `[DONE]`, as when a replica fails). Each of its requests ends here, counted as a
   * router failure (`internal_error`), its replica's place freed, its queue place given up.
   */
  workerGone(link: WorkerLink, why: string): void {
    const held = this.live.get(link);
    this.live.delete(link);
    for (const { ex } of held?.values() ?? []) {
      ex.end('internal_error', why);
      ex.status = 500;
      this.settle(ex);
    }
  }

  private async routeForWorker(link: WorkerLink, m: Extract<FromWorker, { t: 'route' }>): Promise<void> {
    const ex = new Exchange(requestOf(m.head), NO_RESPONSE, local(m.arrived));
    ex.worker = link.index;
    const { session, prefix, model } = m.keys;
    ex.session = session;
    ex.request = { sessionId: session.id, publish: false, prefix, model };
    if (m.body !== undefined) ex.body = bytes(m.body);
    const held: Remote = { ex, link, n: m.n };
    this.held(link).set(m.n, held);
    this.observer.arrived();
    ex.onAbort = (reason) => link.send({ t: 'abort', n: m.n, reason });
    const refused = this.intake.placeable(ex.request);
    if (refused !== undefined) return this.refuse(held, refused);
    if (this.routing.shared.enabled) {
      const { publish, holder } = await this.routing.syncRequest(m.keys);
      if (ex.closed) return;
      ex.request = { ...ex.request, publish, holder };
    }
    // A first turn of a session with an id is placed by its prompt: the chain the worker read, else the
    // decoded body, asked for then only (the bytes a warm copy sends may be compressed).
    if (session.source !== 'minted' && this.routing.readsBody(session.id)) {
      if (m.firstTurn !== undefined) ex.request = { ...ex.request, firstTurn: m.firstTurn };
      else {
        const body = await new Promise<Buffer>((resolve) => ((held.bodyWanted = resolve), link.send({ t: 'body?', n: m.n })));
        if (ex.closed) return;
        ex.request = { ...ex.request, body };
      }
    }
    const request = ex.request;
    const d = this.routing.route(request);
    if (d.kind === 'none') return this.refuse(held, noReplica(request.model));
    if (d.kind !== 'wait') return this.grant(held, d);
    const waiter = {
      request,
      admit: (routed: Routed) => this.grant(held, routed),
      refuse: (why: Refusal) => this.refuse(held, queueRefusal(why, request.model, this.admission.timeoutSeconds)),
    };
    if (!this.admission.enqueue(waiter)) return this.refuse(held, queueFull(this.config.queueMax));
    ex.waiter = waiter;
  }

  private grant({ ex, link, n }: Remote, d: Routed): void {
    ex.waiter = undefined;
    if (ex.closed) return;
    ex.outcome = outcomeOf(d);
    ex.occupy(d.replica);
    link.send({ t: 'grant', n, replica: this.address(d.replica), outcome: ex.outcome });
    if (d.kind === 'initialize' && d.home !== undefined && ex.body !== undefined) this.warm.handOff(ex, d.replica, d.home);
  }

  private refuse({ ex, link, n }: Remote, refused: Refused): void {
    ex.waiter = undefined;
    if (!ex.closed) link.send({ t: 'refuse', n, refused });
  }

  /** A first attempt failed before the replica saw it: the same choice the primary's own data plane makes. */
  private retry(link: WorkerLink, m: Extract<FromWorker, { t: 'retry' }>): void {
    const held = this.live.get(link)?.get(m.n);
    const r = held?.ex.replica;
    if (held === undefined || r === undefined) return link.send({ t: 'retried', n: m.n, replica: undefined });
    const ex = held.ex;
    if (ex.vacate()) this.admission.pump();
    if (m.signal) this.health.connectFailed(r, m.message, m.code);
    const next = this.routing.retryTarget(ex.request!, r, m.staleReuse);
    if (next !== undefined) {
      ex.occupy(next);
      if (next !== r) ex.outcome = switched('unhealthy');
    }
    link.send({ t: 'retried', n: m.n, replica: next === undefined ? undefined : this.address(next) });
  }

  private endForWorker(link: WorkerLink, n: number, head: RequestHead | undefined, rec: EndRecord): void {
    const map = this.held(link);
    let ex = map.get(n)?.ex;
    map.delete(n);
    if (ex === undefined) {
      if (head === undefined) return; // a request the primary settled already (its worker's end raced a crash report)
      // Answered by the worker before routing (a refusal, a client that left while sending).
      ex = new Exchange(requestOf(head), NO_RESPONSE, local(rec.marks.arrived));
      ex.worker = link.index;
      this.observer.arrived();
    }
    ex.session = rec.session;
    if (ex.request === undefined && rec.model !== undefined) ex.request = { sessionId: rec.session?.id ?? '', publish: false, model: rec.model };
    ex.outcome = rec.outcome;
    ex.status = rec.status;
    ex.end(rec.cause, rec.detail);
    ex.bytesIn = rec.bytesIn;
    ex.bytesOut = rec.bytesOut;
    ex.attempts = rec.attempts;
    ex.stream = rec.stream;
    const at = ex.at;
    at.upstreamWritten = local(rec.marks.upstreamWritten);
    at.upstreamFirstByte = local(rec.marks.upstreamFirstByte);
    at.clientFirstByte = local(rec.marks.clientFirstByte);
    at.firstChunk = local(rec.marks.firstChunk);
    at.lastChunk = local(rec.marks.lastChunk);
    this.settle(ex);
  }

  /** The client side of `ex` is gone: out of the queue, its place freed, observed once. */
  private settle(ex: Exchange): void {
    ex.closed = true;
    if (ex.waiter !== undefined) this.admission.leave(ex.waiter);
    if (ex.vacate()) this.admission.pump();
    if (ex.cause === 'internal_error') this.internalErrors.record('data_plane');
    this.observer.ended(ex);
    ex.release();
  }

  /** The primary itself failed on a worker's request (a router bug): answered 500 by the worker. */
  private failed(link: WorkerLink, n: number, err: unknown): void {
    this.internalErrors.record('data_plane');
    const held = this.live.get(link)?.get(n);
    if (held !== undefined) this.refuse(held, { code: 'internal_error', cause: 'rejected', message: `internal router error: ${String(err)}` });
  }

  private held(link: WorkerLink): Map<number, Remote> {
    let m = this.live.get(link);
    if (m === undefined) this.live.set(link, (m = new Map<number, Remote>()));
    return m;
  }

  /** How a worker dials `r` (a static replica's TLS settings come from its config entry). */
  private address(r: Replica): ReplicaAddress {
    let a = this.addresses.get(r);
    if (a === undefined) {
      const ep = r.endpoint;
      const spec = this.config.replicas.find((s) => s.name === r.name);
      a = { name: r.name, url: ep.url, scheme: ep.scheme, host: ep.host, port: ep.port, caFile: spec?.caFile, tlsVerify: spec?.tlsVerify };
      this.addresses.set(r, a);
    }
    return a;
  }
}

const bytes = (b: Uint8Array): Buffer => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/** The request side of a worker's exchange: what the request log, the route label and a warm copy read. */
function requestOf(head: RequestHead): IncomingMessage {
  const headers = head.headers === undefined ? { 'x-request-id': head.id } : { ...head.headers, 'x-request-id': head.id };
  return { method: head.method, url: head.url, headers, socket: { remoteAddress: head.remoteAddress, encrypted: false } } as unknown as IncomingMessage;
}
