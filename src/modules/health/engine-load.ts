import type { EngineKind } from '../../config/router-config.js';

/** Per engine, the gauges that count requests running and waiting (vLLM, SGLang, llama.cpp server). */
const QUEUE_GAUGES: Readonly<Record<EngineKind, readonly string[]>> = {
  vllm: ['vllm:num_requests_running', 'vllm:num_requests_waiting'],
  sglang: ['sglang:num_running_reqs', 'sglang:num_queue_reqs'],
  llamacpp: ['llamacpp:requests_processing', 'llamacpp:requests_deferred'],
};
const ANY = Object.values(QUEUE_GAUGES).flat();

/**
 * Sum of the engine's running + waiting requests from its Prometheus text (every series of the
 * gauges, e.g. one per model), or undefined when it exposes none of them. `any` takes whichever
 * known engine's gauges appear (the bundled simulator publishes vLLM's).
 */
export function engineQueue(text: string, engine: EngineKind | 'any' = 'any'): number | undefined {
  const gauges = engine === 'any' ? ANY : QUEUE_GAUGES[engine];
  let total: number | undefined;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const name = gauges.find((g) => line.startsWith(g) && (line[g.length] === ' ' || line[g.length] === '{'));
    if (name === undefined) continue;
    const v = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(v)) total = (total ?? 0) + v;
  }
  return total;
}
