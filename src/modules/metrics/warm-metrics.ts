import { Counter, type Registry } from 'prom-client';
import type { WarmCopies } from '../proxy/warm-copy.service.js';

/** Warm hand-off copies (routing.warm_handoff, docs/design.md §6.2) by home replica and result. */
export function registerWarmMetrics(reg: Registry, P: string, warm: WarmCopies): void {
  const copies = new Counter({
    name: `${P}warm_copies_total`,
    help: "Warm hand-off copies of a new conversation's first turn sent to its home replica (routing.warm_handoff), by replica and result=ok|failed (a failed one re-pins the conversation where it was answered).",
    labelNames: ['replica', 'result'],
    registers: [reg],
  });
  warm.onEnd((e) => copies.inc({ replica: e.home.name, result: e.ok ? 'ok' : 'failed' }));
}
