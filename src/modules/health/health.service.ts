import { Inject, Injectable } from '@nestjs/common';
import { setTimeout as delay } from 'node:timers/promises';
import { RouterConfig, type HealthSettings } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { RegistryService } from '../registry/registry.service.js';
import type { Replica } from '../registry/replica.js';
import { probe, TLS_ERROR_CODES, type ProbeResult } from './probe.js';
import { engineQueue } from './engine-load.js';
import { HealthMetrics } from './health.metrics.js';

/** How many replicas are probed at once. */
const PROBE_CONCURRENCY = 16;

/**
 * Active probes with fall/rise hysteresis, and the passive signals of the data plane (contract §5).
 * The only code that changes a replica's `ready` flag.
 */
@Injectable()
export class HealthService {
  /** Read at each use: a config reload (docs/reload.md) takes effect at the next probe. */
  get settings(): HealthSettings {
    return this.config.health;
  }
  private readonly inFlight = new Set<Replica>();
  /** Replicas whose TLS failure was already logged (once per replica until it recovers). */
  private readonly tlsLogged = new WeakSet<Replica>();
  /** Notified when a replica becomes ready or unready (fleet, metrics). */
  private readonly listeners: Array<(r: Replica, ready: boolean) => void> = [];

  constructor(
    private readonly config: RouterConfig,
    private readonly registry: RegistryService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
    private readonly metrics: HealthMetrics,
  ) {
    this.engineLoad = config.redisUrl !== undefined;
  }

  /** Several routers share the replicas: also read each engine's own queue (see engine-load.ts). */
  private readonly engineLoad: boolean;

  onTransition(l: (r: Replica, ready: boolean) => void): void {
    this.listeners.push(l);
  }

  /** One poll of every replica, spread over a tenth of the interval, bounded concurrency. */
  async tick(): Promise<void> {
    const due = this.registry.list.filter((r) => !this.inFlight.has(r) && !r.stopping);
    const spread = Math.min(this.settings.intervalMs / 10, 500);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < due.length) {
        const r = due[next++];
        if (spread > 0 && due.length > 1) await delay(Math.random() * spread);
        await this.check(r);
      }
    };
    await Promise.all(Array.from({ length: Math.min(PROBE_CONCURRENCY, due.length) }, worker));
  }

  /** Probe one replica now and apply the result. */
  async check(r: Replica): Promise<ProbeResult> {
    this.inFlight.add(r);
    try {
      const res = await probe(r.endpoint, this.settings.path, this.settings.timeoutMs);
      if (!r.removed) this.record(r, res);
      if (res.ok && !r.removed && (r.engineMetrics !== undefined || this.engineLoad)) await this.sampleEngineLoad(r);
      this.metrics.probed(r, res.ok, res.ms);
      return res;
    } finally {
      this.inFlight.delete(r);
    }
  }

  /** When each replica's engine metrics were last scraped (performance.now() ms). */
  private readonly lastScrape = new WeakMap<Replica, number>();

  /**
   * The engine's running + waiting requests beyond this router's own, on the probe connection:
   * every `metricsIntervalMs` for a replica with `engineMetrics` (its path and metric set), every
   * probe at `/metrics` with several routers. A configured replica whose metrics cannot be read
   * counts 0 (the router's own signals alone) and says so once per change, in the log and in
   * `engineMetricsOk` (a gauge).
   */
  private async sampleEngineLoad(r: Replica): Promise<void> {
    const spec = r.engineMetrics;
    const now = performance.now();
    if (spec !== undefined && now - (this.lastScrape.get(r) ?? -Infinity) < this.settings.metricsIntervalMs) return;
    this.lastScrape.set(r, now);
    const before = r.outstanding;
    const m = await probe(r.endpoint, spec?.path ?? '/metrics', this.settings.timeoutMs, 512 * 1024);
    const total = m.ok && m.body !== undefined ? engineQueue(m.body, spec?.engine) : undefined;
    // Our own requests that started while the sample was taken are in the engine's count too.
    r.health.engineLoad(total === undefined ? 0 : Math.max(0, total - Math.max(before, r.outstanding)));
    if (spec === undefined || r.removed) return;
    const ok = total !== undefined;
    if (ok === r.health.engineMetricsOk) return;
    const first = r.health.engineMetricsOk === null;
    r.health.engineMetricsRead(ok);
    if (ok && !first) this.log.info({ event: 'engine_metrics_ok', replica: r.name }, `engine metrics of ${r.name} are readable again`);
    if (!ok) {
      const why =
        m.status === undefined ? (m.error ?? 'no answer') : m.ok ? `no ${spec.engine === 'any' ? 'known' : spec.engine} load gauges` : `status ${m.status}`;
      this.log.warn(
        { event: 'engine_metrics_unreadable', replica: r.name, path: spec.path, reason: why },
        `cannot read the engine metrics of ${r.name} at ${spec.path} (${why}); routing on the router's own counts`,
      );
    }
  }

  /** Apply a probe result with hysteresis. */
  record(r: Replica, res: ProbeResult): void {
    r.health.probed({
      ok: res.ok,
      at: new Date().toISOString(),
      ...(res.status !== undefined ? { status: res.status } : {}),
      ...(res.error !== undefined ? { error: res.error } : {}),
    });
    if (res.code !== undefined && TLS_ERROR_CODES.has(res.code)) this.logTlsFailure(r, res.code, res.error ?? '');
    if (res.ok) {
      this.tlsLogged.delete(r);
      this.success(r);
    } else {
      this.failure(r, res.status !== undefined ? `status ${res.status}` : (res.error ?? 'probe failed'));
    }
  }

  /** Data plane: the replica could not be connected to. It is not listening: demote at once. */
  connectFailed(r: Replica, reason: string, code?: string): void {
    if (code !== undefined && TLS_ERROR_CODES.has(code)) this.logTlsFailure(r, code, reason);
    r.health.refused(this.settings.fall);
    if (r.ready) this.setReady(r, false, `connect failed: ${reason}`);
  }

  /** Data plane: a 5xx (or a broken exchange) counts as one failed health check. */
  upstreamFailed(r: Replica, reason: string): void {
    this.failure(r, reason);
  }

  private success(r: Replica): void {
    const passes = r.health.passed();
    if (!r.ready && passes >= this.settings.rise) this.setReady(r, true, 'health checks passed');
  }

  private failure(r: Replica, reason: string): void {
    const fails = r.health.failed();
    if (r.ready && fails >= this.settings.fall) this.setReady(r, false, reason);
  }

  private setReady(r: Replica, ready: boolean, reason: string): void {
    r.health.setReady(ready);
    this.log.info({ event: ready ? 'ready' : 'unready', replica: r.name, url: r.url, reason }, `replica ${r.name} is ${ready ? 'ready' : 'unready'}`);
    for (const l of this.listeners) l(r, ready);
  }

  private logTlsFailure(r: Replica, code: string, detail: string): void {
    if (this.tlsLogged.has(r)) return;
    this.tlsLogged.add(r);
    this.log.error(
      { event: 'tls_error', replica: r.name, url: r.url, code },
      `TLS verification of replica ${r.name} (${r.url}) failed: ${code} ${detail}; ` +
        `not routing to it. Give its CA in "ca_file" (or set "tls_verify": false to skip verification)`,
    );
  }
}
