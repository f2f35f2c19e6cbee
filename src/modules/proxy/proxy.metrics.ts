import { Injectable } from '@nestjs/common';
import { Counter, Histogram } from 'prom-client';
import { METRIC_PREFIX, MetricsRegistry, monotonic } from '../../common/metrics/metrics-registry.js';
import { histogramSeries, type Observer } from '../../common/metrics/histogram-series.js';
import type { Replica } from '../registry/replica.js';

/**
 * The proxy module's collector, observed where the event happens: every data-plane arrival, the
 * gaps of relayed streams, and warm hand-off copies (routing.warm_handoff, docs/design.md §6.2).
 * What a finished exchange adds (requests_total and the histograms) is the metrics module's, from
 * ExchangeObserver.
 */
@Injectable()
export class ProxyMetrics {
  /** Arrivals as a plain number, added to the counter at each scrape (prom-client hashes labels on every inc()). */
  private arrivals = 0;
  /** Observed once per relayed chunk. */
  private readonly gap: Observer;
  private readonly copies: Counter<'replica' | 'result'>;

  constructor(metrics: MetricsRegistry) {
    const reg = metrics.registry;
    monotonic(
      reg,
      `${METRIC_PREFIX}requests_received_total`,
      'Data-plane requests received (every one ends with exactly one termination cause).',
      undefined,
      () => ({
        '': this.arrivals,
      }),
    );
    const gap = new Histogram({
      name: `${METRIC_PREFIX}stream_chunk_gap_seconds`,
      help: 'Streams: gap between consecutive chunks relayed to the client.',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
      registers: [reg],
    });
    this.gap = histogramSeries(gap, {});
    this.copies = new Counter({
      name: `${METRIC_PREFIX}warm_copies_total`,
      help: "Warm hand-off copies of a new conversation's first turn sent to its home replica (routing.warm_handoff), by replica and result=ok|failed (a failed one re-pins the conversation where it was answered).",
      labelNames: ['replica', 'result'],
      registers: [reg],
    });
  }

  arrived(): void {
    this.arrivals++;
  }

  chunkGap(seconds: number): void {
    this.gap.observe(seconds);
  }

  warmCopyEnded(home: Replica, ok: boolean): void {
    this.copies.inc({ replica: home.name, result: ok ? 'ok' : 'failed' });
  }
}
