import { Injectable } from '@nestjs/common';
import { Counter, type Registry } from 'prom-client';
import { METRIC_PREFIX, MetricsRegistry } from '../../common/metrics/metrics-registry.js';
import { WarmCopies } from './warm-copy.service.js';

/** Warm hand-off copies (routing.warm_handoff, docs/design.md §6.2) by home replica and result. */
function registerWarmMetrics(reg: Registry, P: string, warm: WarmCopies): void {
  const copies = new Counter({
    name: `${P}warm_copies_total`,
    help: "Warm hand-off copies of a new conversation's first turn sent to its home replica (routing.warm_handoff), by replica and result=ok|failed (a failed one re-pins the conversation where it was answered).",
    labelNames: ['replica', 'result'],
    registers: [reg],
  });
  warm.onEnd((e) => copies.inc({ replica: e.home.name, result: e.ok ? 'ok' : 'failed' }));
}

/** The proxy module's collector for warm hand-off copies. */
@Injectable()
export class WarmMetrics {
  constructor(metrics: MetricsRegistry, warm: WarmCopies) {
    registerWarmMetrics(metrics.registry, METRIC_PREFIX, warm);
  }
}
