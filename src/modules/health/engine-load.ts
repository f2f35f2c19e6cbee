/** Engine gauges that count requests running or queued (vLLM, SGLang, the bundled simulator). */
const QUEUE_GAUGES = ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'sglang:num_running_reqs', 'sglang:num_queue_reqs'];

/**
 * Sum of the engine's running + waiting requests from its Prometheus text, or undefined when it
 * exposes none of the known gauges.
 */
export function engineQueue(text: string): number | undefined {
  let total: number | undefined;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const name = QUEUE_GAUGES.find((g) => line.startsWith(g) && (line[g.length] === ' ' || line[g.length] === '{'));
    if (name === undefined) continue;
    const v = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(v)) total = (total ?? 0) + v;
  }
  return total;
}
