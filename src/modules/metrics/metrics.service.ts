import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, collectDefaultMetrics, type Registry } from 'prom-client';
import { METRIC_PREFIX, MetricsRegistry, monotonic, ScrapedCounts } from '../../common/metrics/metrics-registry.js';
import { histogramSeries, type Observer } from '../../common/metrics/histogram-series.js';
import { INTERNAL_ERROR_SOURCES, InternalErrors } from '../../common/errors/internal-errors.js';
import type { Exchange } from '../proxy/exchange.js';
import { ExchangeObserver } from '../proxy/exchange.observer.js';
import { RegistryService } from '../registry/registry.service.js';
import { AdmissionService } from '../routing/admission.service.js';
import { RoutingService } from '../routing/routing.service.js';
import type { ReplicaState } from '../registry/replica.js';
import { routeLabel } from '../../common/http/route-label.js';
import { registerPrefixMetrics } from './prefix-metrics.js';
import { registerReadMetrics } from './read-metrics.js';
import { registerSpeedMetrics } from './speed-metrics.js';
import { modelLabel, registerModelMetrics } from './model-metrics.js';
import { WorkerPool } from '../workers/worker-pool.service.js';

const P = METRIC_PREFIX;
const STATES: readonly ReplicaState[] = ['launching', 'ready', 'unready', 'draining', 'stopping', 'failed'];
/** Sub-millisecond buckets: the router's own overhead is measured in tens of microseconds. */
const OVERHEAD_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1];
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Prometheus metrics (contract §9). Labels are bounded: route (known OpenAI paths or `other`), status,
 * replica (fleet size), decision/reason (fixed sets), model (the models replicas list, else `none` or
 * `unknown`). Never a session id.
 */
@Injectable()
export class MetricsService {
  readonly registry: Registry;
  private readonly requests: Counter<'route' | 'status' | 'replica' | 'decision' | 'reason' | 'model'>;
  private readonly terminations: Counter<'cause'>;
  private readonly overhead: Histogram<'phase'>;
  private readonly ttft: Histogram;
  private readonly duration: Histogram<'route'>;

  constructor(
    private readonly replicas: RegistryService,
    observer: ExchangeObserver,
    admission: AdmissionService,
    routing: RoutingService,
    internalErrors: InternalErrors,
    metrics: MetricsRegistry,
    private readonly workers: WorkerPool,
  ) {
    const reg = (this.registry = metrics.registry);
    const registry = replicas;
    collectDefaultMetrics({ register: reg });
    const { requestCounts, causeCounts } = this;
    this.requests = new Counter({
      name: `${P}requests_total`,
      help: 'Data-plane requests by route, status, replica, routing decision and requested model.',
      labelNames: ['route', 'status', 'replica', 'decision', 'reason', 'model'],
      registers: [reg],
      collect() {
        requestCounts.flush(this);
      },
    });
    this.terminations = new Counter({
      name: `${P}request_terminations_total`,
      help: 'How data-plane requests ended: ok|client_abort|upstream_error|upstream_timeout|no_replica|rejected|internal_error.',
      labelNames: ['cause'],
      registers: [reg],
      collect() {
        causeCounts.flush(this);
      },
    });
    this.overhead = new Histogram({
      name: `${P}overhead_seconds`,
      help: 'Time spent in the router: phase=request is arrival to upstream request written; phase=response is upstream response to first byte handed to the client.',
      labelNames: ['phase'],
      buckets: OVERHEAD_BUCKETS,
      registers: [reg],
    });
    this.ttft = new Histogram({
      name: `${P}stream_first_chunk_seconds`,
      help: 'Streams: arrival to the first chunk relayed to the client (time to first token as the router sees it).',
      buckets: LATENCY_BUCKETS,
      registers: [reg],
    });
    this.duration = new Histogram({
      name: `${P}request_duration_seconds`,
      help: 'Data-plane request duration, arrival to the end of the response.',
      labelNames: ['route'],
      buckets: LATENCY_BUCKETS,
      registers: [reg],
    });

    new Gauge({
      name: `${P}replica_inflight`,
      help: "Requests in flight per replica (the router's own count, used by the routing policy).",
      labelNames: ['replica'],
      registers: [reg],
      collect() {
        this.reset();
        for (const r of registry.list) this.set({ replica: r.name }, r.outstanding);
      },
    });
    new Gauge({
      name: `${P}replica_foreign_load`,
      help: "Several routers: requests the engine reports on a replica beyond this router's own (other routers' traffic), from the last health sample.",
      labelNames: ['replica'],
      registers: [reg],
      collect() {
        this.reset();
        for (const r of registry.list) this.set({ replica: r.name }, r.health.foreignLoad);
      },
    });
    new Gauge({
      name: `${P}replica_state`,
      help: 'Replica state: 1 for the current state of each replica.',
      labelNames: ['replica', 'kind', 'state'],
      registers: [reg],
      collect() {
        this.reset();
        for (const r of registry.list) for (const s of STATES) this.set({ replica: r.name, kind: r.kind, state: s }, r.state === s ? 1 : 0);
      },
    });
    new Gauge({
      name: `${P}queue_depth`,
      help: "Requests waiting in the admission queue for a replica under its max_inflight (in no replica's in-flight count).",
      registers: [reg],
      collect() {
        this.set(admission.depth);
      },
    });
    new Gauge({
      name: `${P}replica_sessions`,
      help: 'Sessions pinned per replica.',
      labelNames: ['replica'],
      registers: [reg],
      collect() {
        this.reset();
        for (const r of registry.list) this.set({ replica: r.name }, r.pins);
      },
    });
    new Gauge({
      name: `${P}sessions`,
      help: 'Live sessions in the directory.',
      registers: [reg],
      collect() {
        this.set(routing.sessions.liveCount(routing.clock.now()));
      },
    });
    registerPrefixMetrics(reg, P, routing);
    registerSpeedMetrics(reg, P, registry, routing);
    registerReadMetrics(reg, P, registry);
    monotonic(
      reg,
      `${P}session_evictions_total`,
      'Sessions dropped from the directory, by cause (lru: over --max-sessions; ttl: idle past --session-ttl).',
      'cause',
      () => ({
        lru: routing.sessions.evictedLru,
        ttl: routing.sessions.evictedTtl,
      }),
    );
    // Every source is exported from the start (at 0), so an alert on its increase has a series to watch.
    const internalSeen = new Map<string, number>();
    new Counter({
      name: `${P}internal_errors_total`,
      help: 'Router bugs caught instead of crashing, by where: data_plane (a /v1/ request answered 500) or unhandled_rejection (process handler). Any increase deserves a look at the error log lines.',
      labelNames: ['source'],
      registers: [reg],
      collect() {
        for (const source of INTERNAL_ERROR_SOURCES) {
          const now = internalErrors.count(source);
          this.inc({ source }, now - (internalSeen.get(source) ?? 0));
          internalSeen.set(source, now);
        }
      },
    });
    monotonic(reg, `${P}rejected_total`, 'Requests refused because no replica was routable.', undefined, () => ({ '': routing.rejected }));

    registerModelMetrics(reg, P, replicas);

    observer.subscribe((ex) => this.exchangeEnded(ex));
  }

  /**
   * Label sets are hashed by prom-client on every call: the hot path counts in series keyed by one
   * string (added to the counters at each scrape) and observes histograms through series found
   * once (histogramSeries), looked up the same way (bounded like the labels themselves).
   */
  private readonly requestCounts = new ScrapedCounts<'route' | 'status' | 'replica' | 'decision' | 'reason' | 'model'>();
  private readonly causeCounts = new ScrapedCounts<'cause'>();
  private readonly durationSeries = new Map<string, Observer>();
  private overheadRequest: Observer | undefined;
  private overheadResponse: Observer | undefined;
  private ttftSeries: Observer | undefined;

  private exchangeEnded(ex: Exchange): void {
    const route = routeLabel(ex.req.url);
    const status = String(ex.status || (ex.cause === 'client_abort' ? 499 : 0));
    const replica = ex.replica?.name ?? 'none';
    const model = modelLabel(ex.request?.model, this.replicas);
    const { kind: decision, reason, header } = ex.outcome;
    const key = `${route} ${status} ${replica} ${header} ${model}`;
    this.requestCounts.add(key, () => ({ route, status, replica, decision, reason, model }));
    const cause = ex.cause ?? 'ok';
    this.causeCounts.add(cause, () => ({ cause }));
    const end = performance.now();
    let d = this.durationSeries.get(route);
    if (d === undefined) this.durationSeries.set(route, (d = histogramSeries(this.duration, { route })));
    d.observe((end - ex.arrivedAt) / 1000);
    this.overheadRequest ??= histogramSeries(this.overhead, { phase: 'request' });
    this.overheadResponse ??= histogramSeries(this.overhead, { phase: 'response' });
    if (ex.at.upstreamWritten > 0) this.overheadRequest.observe((ex.at.upstreamWritten - ex.arrivedAt) / 1000);
    if (ex.at.clientFirstByte > 0 && ex.at.upstreamFirstByte > 0) this.overheadResponse.observe((ex.at.clientFirstByte - ex.at.upstreamFirstByte) / 1000);
    if (ex.stream && ex.at.lastChunk > 0 && ex.at.firstChunk > 0)
      (this.ttftSeries ??= histogramSeries(this.ttft, {})).observe((ex.at.firstChunk - ex.arrivedAt) / 1000);
  }

  /** The exposition text; with worker processes, their metrics summed with the primary's (one series per label set). */
  async metrics(): Promise<string> {
    if (!this.workers.enabled) return this.registry.metrics();
    return (await this.workers.aggregate(await this.registry.getMetricsAsJSON())).metrics();
  }
}
