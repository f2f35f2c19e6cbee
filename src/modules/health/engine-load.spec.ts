import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { engineQueue } from './engine-load.js';

describe('engineQueue', () => {
  it('sums running and waiting over label sets (vLLM)', () => {
    const text = [
      '# HELP vllm:num_requests_running Number of requests running',
      '# TYPE vllm:num_requests_running gauge',
      'vllm:num_requests_running{model_name="a"} 3.0',
      'vllm:num_requests_running{model_name="b"} 1',
      'vllm:num_requests_waiting{model_name="a"} 2',
      'vllm:num_requests_running_total 99',
    ].join('\n');
    assert.equal(engineQueue(text), 6);
  });

  it('reads SGLang gauges and answers undefined when none is exposed', () => {
    assert.equal(engineQueue('sglang:num_running_reqs 4\nsglang:num_queue_reqs 1\n'), 5);
    assert.equal(engineQueue('process_cpu_seconds_total 1\n'), undefined);
  });

  it("reads the llama.cpp server gauges, and only the named engine's when one is named", () => {
    const text = 'llamacpp:requests_processing 2\nllamacpp:requests_deferred 7\nvllm:num_requests_waiting 100\n';
    assert.equal(engineQueue(text, 'llamacpp'), 9);
    assert.equal(engineQueue(text, 'vllm'), 100);
    assert.equal(engineQueue(text, 'sglang'), undefined);
    assert.equal(engineQueue(text), 109);
  });
});
