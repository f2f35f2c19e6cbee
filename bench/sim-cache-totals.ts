/**
 * What the simulators' KV caches and TTFT recorders say about a whole run, summed over replicas:
 * the routing-quality scenarios (e, v, x) all judge a policy by these.
 */
import type { SimStats } from '../test/support/sim-process.js';

export interface SimCacheTotals {
  readonly promptTokens: number;
  readonly cachedTokens: number;
  /** Cached ÷ prompt tokens (0 with no prompts). */
  readonly hitRate: number;
  /** Warm hand-off copies (`x-router-warm: 1`): prefilled, but kept out of the totals above. */
  readonly warm: { readonly requests: number; readonly promptTokens: number; readonly cachedTokens: number };
  /** Cached ÷ prompt tokens over every prefill, warm copies included (0 with none). */
  readonly hitRateAll: number;
  /** Mean TTFT over every request the simulators saw (NaN with none). */
  readonly ttftMeanMs: number;
  /** The worst replica's p99 TTFT. */
  readonly ttftP99Ms: number;
}

export function simCacheTotals(stats: readonly SimStats[]): SimCacheTotals {
  let promptTokens = 0;
  let cachedTokens = 0;
  let count = 0;
  let ttftSum = 0;
  const warm = { requests: 0, promptTokens: 0, cachedTokens: 0 };
  for (const s of stats) {
    promptTokens += s.cache.prompt_tokens;
    cachedTokens += s.cache.cached_tokens;
    warm.requests += s.cache.warm.requests;
    warm.promptTokens += s.cache.warm.prompt_tokens;
    warm.cachedTokens += s.cache.warm.cached_tokens;
    count += s.ttft_ms.count;
    ttftSum += s.ttft_ms.mean * s.ttft_ms.count;
  }
  return {
    promptTokens,
    cachedTokens,
    hitRate: promptTokens === 0 ? 0 : cachedTokens / promptTokens,
    warm,
    hitRateAll: promptTokens + warm.promptTokens === 0 ? 0 : (cachedTokens + warm.cachedTokens) / (promptTokens + warm.promptTokens),
    ttftMeanMs: count === 0 ? NaN : ttftSum / count,
    ttftP99Ms: Math.max(...stats.map((s) => s.ttft_ms.p99)),
  };
}
