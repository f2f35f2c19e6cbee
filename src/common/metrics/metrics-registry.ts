import { Injectable, Module } from '@nestjs/common';
import { Counter, Registry, type LabelValues } from 'prom-client';

/** Every metric's name starts with it (contract §9). */
export const METRIC_PREFIX = 'affinity_router_';

/**
 * The router's one prom-client registry, at the foot of the tree: each module registers its own
 * metrics on it (its `*.metrics.ts` collector) and `GET /metrics` serialises it.
 */
@Injectable()
export class MetricsRegistry {
  readonly registry = new Registry();
}

/** Imported by every module that registers metrics; not global, so the dependency shows. */
@Module({ providers: [MetricsRegistry], exports: [MetricsRegistry] })
export class MetricsRegistryModule {}

/** A counter whose value lives elsewhere: each scrape adds what it grew by since the last one. */
export function monotonic(reg: Registry, name: string, help: string, label: string | undefined, read: () => Record<string, number>): void {
  const last = new Map<string, number>();
  new Counter({
    name,
    help,
    labelNames: label ? [label] : [],
    registers: [reg],
    collect() {
      for (const [k, v] of Object.entries(read())) {
        const d = v - (last.get(k) ?? 0);
        if (d > 0) {
          if (label) this.inc({ [label]: k }, d);
          else this.inc(d);
        }
        last.set(k, v);
      }
    },
  });
}

/**
 * Counts kept as plain numbers where the event happens and added to a prom-client counter at each
 * scrape (from its `collect()`): prom-client hashes the label set on every `inc()`, bound children
 * included, which the data path would pay once per request. Series are keyed by one string the
 * caller builds; their labels are made once, the first time.
 */
export class ScrapedCounts<L extends string> {
  private readonly series = new Map<string, { readonly labels: LabelValues<L>; n: number; sent: number }>();

  /** One more in the series `key`. */
  add(key: string, labels: () => LabelValues<L>): void {
    let s = this.series.get(key);
    if (s === undefined) this.series.set(key, (s = { labels: labels(), n: 0, sent: 0 }));
    s.n++;
  }

  /** Adds what each series grew by since the last scrape to `counter`. */
  flush(counter: Counter<L>): void {
    for (const s of this.series.values()) {
      if (s.n === s.sent) continue;
      counter.inc(s.labels, s.n - s.sent);
      s.sent = s.n;
    }
  }
}
