import { Injectable } from '@nestjs/common';
import { Counter, Histogram } from 'prom-client';
import { RouterConfig } from '../../config/router-config.js';
import { METRIC_PREFIX, MetricsRegistry } from '../../common/metrics/metrics-registry.js';
import type { StateWrite } from './loop-hold.js';

/**
 * The `--state-file`'s writes (contract §6): full snapshots and journal appends by result, how long
 * each took, and the longest stretch each held the event loop (its encoding runs on the loop in
 * slices: docs/design.md §9). Absent without `--state-file`. StateService reports each write as it settles.
 */
@Injectable()
export class StateMetrics {
  private readonly writes: Counter<'kind' | 'result'> | undefined;
  private readonly seconds: Histogram<'kind'> | undefined;
  private readonly hold: Histogram<'kind'> | undefined;

  constructor(metrics: MetricsRegistry, config: RouterConfig) {
    if (config.stateFile === undefined) return;
    const reg = metrics.registry;
    const P = METRIC_PREFIX;
    const writes = new Counter({
      name: `${P}state_writes_total`,
      help: 'Writes of the --state-file: kind=snapshot (the whole file) or journal (a line of changed pins), result=ok|error.',
      labelNames: ['kind', 'result'],
      registers: [reg],
    });
    const seconds = new Histogram({
      name: `${P}state_write_seconds`,
      help: 'Wall time of each --state-file write, fsync included, by kind (snapshot|journal).',
      labelNames: ['kind'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [reg],
    });
    const hold = new Histogram({
      name: `${P}state_write_loop_hold_seconds`,
      help: 'The longest stretch each --state-file write held the event loop (requests wait that long at most for it), by kind.',
      labelNames: ['kind'],
      buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1],
      registers: [reg],
    });
    for (const kind of ['snapshot', 'journal']) for (const result of ['ok', 'error']) writes.inc({ kind, result }, 0);
    this.writes = writes;
    this.seconds = seconds;
    this.hold = hold;
  }

  /** A write of the state file or its journal was tried. */
  written(w: StateWrite): void {
    this.writes?.inc({ kind: w.kind, result: w.ok ? 'ok' : 'error' });
    this.seconds?.observe({ kind: w.kind }, w.seconds);
    this.hold?.observe({ kind: w.kind }, w.loopHoldSeconds);
  }
}
