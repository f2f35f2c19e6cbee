import { Injectable } from '@nestjs/common';
import { Histogram } from 'prom-client';
import { METRIC_PREFIX, MetricsRegistry } from '../../common/metrics/metrics-registry.js';
import type { QueueOutcome } from './route-request.js';

/** Blocks of 256 characters: 0 is no match, 64 is 16 KiB of shared prompt. */
const MATCH_BUCKETS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 8192];

/** The routing module's collector: observed where the event happens (the decision, a request leaving the queue). */
@Injectable()
export class RoutingMetrics {
  private readonly queueWait: Histogram<'outcome'>;
  private readonly matched: Histogram;

  constructor(metrics: MetricsRegistry) {
    const reg = metrics.registry;
    this.queueWait = new Histogram({
      name: `${METRIC_PREFIX}queue_wait_seconds`,
      help: 'Time requests spent in the admission queue, by how they left it: dispatched|abandoned (client left)|timeout (--queue-timeout)|no_replica|shutdown.',
      labelNames: ['outcome'],
      buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [reg],
    });
    this.matched = new Histogram({
      name: `${METRIC_PREFIX}prefix_match_blocks`,
      help: 'Session-less requests with a prompt: blocks of its prefix the index matched at routing (0: no match), whether or not load let it be kept.',
      buckets: MATCH_BUCKETS,
      registers: [reg],
    });
  }

  /** A request left the admission queue after `waitedMs`. */
  queueLeft(outcome: QueueOutcome, waitedMs: number): void {
    this.queueWait.observe({ outcome }, waitedMs / 1000);
  }

  /** A routed session-less request with a prompt: how many blocks of it the index matched (0: none). */
  prefixMatched(blocks: number): void {
    this.matched.observe(blocks);
  }
}
