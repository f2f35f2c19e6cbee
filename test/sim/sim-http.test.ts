/** The HTTP surface of a real simulator process (spawned from the compiled entry point). */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { simRequest, simStream, spawnSim, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { pollUntil } from './poll-until.js';

type Json = Record<string, unknown>;
const json = (body: Buffer): Json => JSON.parse(body.toString('utf8')) as Json;
const chat = (content: string, extra: Json = {}): string => JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content }], ...extra });
const words = (n: number): string => Array.from({ length: n }, (_, i) => `w${i}`).join(' ');

describe('simulator HTTP surface', () => {
  let sim: SimProcess;
  before(async () => {
    sim = await spawnSim({ name: 'http-r0', args: ['--output-tokens', '5', '--ttft-base-ms', '5', '--prefill-ms-per-token', '1'] });
  });
  after(stopAllSims);

  it('answers a non-stream chat completion shaped like OpenAI, with usage', async () => {
    const res = await simRequest(`${sim.url}/v1/chat/completions`, { method: 'POST', body: chat('one two three', { max_tokens: 4 }) });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.equal(res.headers['x-replica-name'], 'http-r0');
    const body = json(res.body);
    assert.match(String(body.id), /^chatcmpl-/);
    assert.equal(body.object, 'chat.completion');
    assert.equal(body.model, 'sim-model');
    assert.equal(typeof body.created, 'number');
    const [choice] = body.choices as Json[];
    assert.deepEqual(choice?.message, { role: 'assistant', content: 'The quick brown fox' });
    assert.equal(choice?.finish_reason, 'length');
    // prompt tokens: "user" + 3 words
    assert.deepEqual(body.usage, { prompt_tokens: 4, completion_tokens: 4, total_tokens: 8, prompt_tokens_details: { cached_tokens: 0 } });
  });

  it('answers /v1/completions with text and the default length', async () => {
    const res = await simRequest(`${sim.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: 'a b c' }) });
    const body = json(res.body);
    assert.match(String(body.id), /^cmpl-/);
    assert.equal(body.object, 'text_completion');
    const [choice] = body.choices as Json[];
    assert.equal(choice?.text, 'The quick brown fox jumps');
    assert.equal(choice?.finish_reason, 'stop');
    assert.deepEqual(body.usage, { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8, prompt_tokens_details: { cached_tokens: 0 } });
  });

  it('reports prefix-cache hits and the TTFT model', async () => {
    const s = await spawnSim({ args: ['--ttft-base-ms', '5', '--prefill-ms-per-token', '1'] });
    const body = JSON.stringify({ prompt: words(40), max_tokens: 1 });
    const first = json((await simRequest(`${s.url}/v1/completions`, { method: 'POST', body })).body);
    const second = json((await simRequest(`${s.url}/v1/completions`, { method: 'POST', body })).body);
    assert.deepEqual((first.usage as Json).prompt_tokens_details, { cached_tokens: 0 });
    assert.deepEqual((second.usage as Json).prompt_tokens_details, { cached_tokens: 32 });
    // A router's warm hand-off copy is prefilled like any request but kept out of the client totals and the TTFT model.
    const warm = await simRequest(`${s.url}/v1/completions`, { method: 'POST', body, headers: { 'x-router-warm': '1' } });
    assert.equal(warm.status, 200);
    const stats = await s.stats();
    assert.deepEqual(stats.cache, { prompt_tokens: 80, cached_tokens: 32, hit_rate: 0.4, warm: { requests: 1, prompt_tokens: 40, cached_tokens: 32 } });
    // TTFT = 5 + 1 × uncached: 45 then 13.
    assert.deepEqual(stats.ttft_ms, { count: 2, mean: 29, p99: 45 });
  });

  it('streams one SSE chunk per token, then finish, usage and [DONE]', async () => {
    const stream = await simStream(`${sim.url}/v1/chat/completions`, {
      body: chat('hi', { stream: true, max_tokens: 3, stream_options: { include_usage: true } }),
    });
    assert.equal(stream.status, 200);
    assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
    assert.equal(stream.headers['x-replica-name'], 'http-r0');
    assert.equal(await stream.done, 'end');
    const data = stream.events.map((e) => e.data);
    assert.equal(data.length, 6);
    assert.equal(data[5], '[DONE]');
    const chunks = data.slice(0, 5).map((d) => JSON.parse(d) as Json);
    const deltas = chunks.slice(0, 3).map((c) => (c.choices as Json[])[0]?.delta);
    assert.deepEqual(deltas, [{ role: 'assistant', content: 'The' }, { content: ' quick' }, { content: ' brown' }]);
    for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(new Set(chunks.map((c) => c.id)).size, 1, 'one id for the whole stream');
    assert.equal((chunks[3]?.choices as Json[])[0]?.finish_reason, 'length');
    assert.deepEqual(chunks[4]?.choices, []);
    assert.equal((chunks[4]?.usage as Json).completion_tokens, 3);
  });

  it('streams completions without a usage chunk unless asked', async () => {
    const stream = await simStream(`${sim.url}/v1/completions`, { body: JSON.stringify({ prompt: 'x', stream: true, max_tokens: 2 }) });
    assert.equal(await stream.done, 'end');
    const data = stream.events.map((e) => e.data);
    assert.equal(data.length, 4);
    assert.equal(data[3], '[DONE]');
    const texts = data.slice(0, 3).map((d) => ((JSON.parse(d) as Json).choices as Json[])[0]?.text);
    assert.deepEqual(texts, ['The', ' quick', '']);
  });

  it('streams a long completion without delays to the end', async () => {
    const stream = await simStream(`${sim.url}/v1/completions`, { body: JSON.stringify({ prompt: 'x', stream: true, max_tokens: 20_000 }) });
    assert.equal(await stream.done, 'end');
    assert.equal(stream.events.length, 20_002);
    assert.equal(stream.events.at(-1)?.data, '[DONE]');
  });

  it('writes chunks one by one, --itl-ms apart', async () => {
    const s = await spawnSim({ args: ['--itl-ms', '50'] });
    const stream = await simStream(`${s.url}/v1/chat/completions`, { body: chat('go', { stream: true, max_tokens: 6 }) });
    assert.equal(await stream.done, 'end');
    const at = stream.events.slice(0, 6).map((e) => e.at);
    const gaps = at.slice(1).map((t, i) => t - (at[i] ?? 0));
    assert.ok((at[5] ?? 0) - (at[0] ?? 0) >= 200, `6 tokens 50 ms apart spread over ${(at[5] ?? 0) - (at[0] ?? 0)} ms`);
    assert.ok(gaps.filter((g) => g >= 30).length >= 4, `chunks arrived in separate reads: gaps ${gaps.join(', ')}`);
  });

  it('counts a client that leaves mid-stream as aborted, long before its 10 s stream would have ended', async () => {
    const s = await spawnSim({ args: ['--itl-ms', '100', '--output-tokens', '100'] });
    const stream = await simStream(`${s.url}/v1/chat/completions`, { body: chat('long', { stream: true }) });
    await stream.waitForEvents(1);
    stream.destroy();
    const left = Date.now();
    const stats = await pollUntil(
      'aborted = 1',
      () => s.stats(),
      (st) => st.aborted === 1,
      5_000,
    );
    assert.ok(Date.now() - left <= 5_000);
    assert.equal(stats.inflight, 0);
    assert.equal(stats.completed, 0);
  });

  it('rejects invalid JSON on completion routes with an OpenAI error', async () => {
    for (const path of ['/v1/chat/completions', '/v1/completions']) {
      const res = await simRequest(`${sim.url}${path}`, { method: 'POST', body: '{not json' });
      assert.equal(res.status, 400);
      const body = json(res.body);
      assert.equal(body.object, 'error');
      assert.equal(body.type, 'invalid_request_error');
      assert.equal(body.code, 400);
      assert.match(String(body.message), /not valid JSON/);
    }
  });

  it('echoes any other /v1 method and path with its query string', async () => {
    const res = await simRequest(`${sim.url}/v1/embeddings?a=1&b=%20x`, { method: 'PATCH', body: 'abcde' });
    assert.equal(res.status, 200);
    assert.deepEqual(json(res.body), { object: 'echo', method: 'PATCH', path: '/v1/embeddings', query: 'a=1&b=%20x', body_bytes: 5 });
  });

  it('lists its model at GET /v1/models', async () => {
    const res = await simRequest(`${sim.url}/v1/models`);
    const body = json(res.body);
    assert.equal(body.object, 'list');
    const [model] = body.data as Json[];
    assert.equal(model?.id, 'sim-model');
    assert.equal(model?.object, 'model');
    assert.equal(model?.owned_by, 'sim');
  });

  it('reports the served model name and devices of a pypto-serving argv', async () => {
    const s = await spawnSim({ args: ['--model', '/m/q', '--devices', '2,3', '--served-model-name', 'qwen', '--show-startup-logs'] });
    const [model] = json((await simRequest(`${s.url}/v1/models`)).body).data as Json[];
    assert.equal(model?.id, 'qwen');
    const stats = await s.stats();
    assert.equal(stats.devices, '2,3');
    assert.equal(stats.model, 'qwen');
    assert.match(s.output().stdout, /INFO sim: .*model=qwen/);
  });

  it('carries X-Replica-Name on every path', async () => {
    for (const path of ['/health', '/metrics', '/__sim/stats', '/v1/models', '/nowhere']) {
      const res = await simRequest(`${sim.url}${path}`);
      assert.equal(res.headers['x-replica-name'], 'http-r0', path);
    }
    assert.equal((await simRequest(`${sim.url}/nowhere`)).status, 404);
  });

  it('exposes Prometheus metrics with the vLLM gauge names', async () => {
    const res = await simRequest(`${sim.url}/metrics`);
    assert.equal(res.status, 200);
    const text = res.body.toString('utf8');
    for (const name of ['sim_requests_total', 'sim_requests_running', 'sim_requests_waiting', 'vllm:num_requests_running', 'vllm:num_requests_waiting']) {
      assert.match(text, new RegExp(`^${name}\\{replica="http-r0"\\} \\d+$`, 'm'), name);
    }
  });

  it('queues beyond --max-running and adds the wait to TTFT', async () => {
    const s = await spawnSim({ args: ['--max-running', '1', '--ttft-base-ms', '300', '--output-tokens', '1'] });
    const send = (): Promise<unknown> => simRequest(`${s.url}/v1/completions`, { method: 'POST', body: '{"prompt":"p"}' });
    const both = Promise.all([send(), send()]);
    await pollUntil(
      '1 running, 1 waiting',
      () => s.stats(),
      (st) => st.running === 1 && st.waiting === 1,
    );
    const metrics = (await simRequest(`${s.url}/metrics`)).body.toString('utf8');
    assert.match(metrics, /^vllm:num_requests_waiting\{[^}]*\} 1$/m);
    await both;
    const stats = await s.stats();
    assert.equal(stats.completed, 2);
    assert.ok(stats.ttft_ms.p99 >= 550, `second request waited for the first: p99 ${stats.ttft_ms.p99}`);
  });

  it('records the last request exactly, including a 5 MiB body', async () => {
    const big = Buffer.alloc(5 * 1024 * 1024, 'abcdefghij');
    const res = await simRequest(`${sim.url}/v1/embeddings?big=1`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/octet-stream', 'X-Session-Id': 'sess-big', 'X-Custom-Thing': 'Foo' },
      body: big,
    });
    assert.equal(json(res.body).body_bytes, big.length);
    const last = (await sim.stats()).last_request;
    assert.ok(last !== null);
    assert.equal(last.method, 'POST');
    assert.equal(last.path, '/v1/embeddings');
    assert.equal(last.query, 'big=1');
    assert.equal(last.body_bytes, big.length);
    assert.equal(last.body_sha256, createHash('sha256').update(big).digest('hex'));
    assert.equal(last.headers['x-custom-thing'], 'Foo');
    assert.equal(last.headers['content-length'], String(big.length));
  });

  it('counts requests by path and by x-session-id', async () => {
    const s = await spawnSim();
    for (const id of ['s1', 's1', 's2']) {
      await simRequest(`${s.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': id }, body: chat('x') });
    }
    await simRequest(`${s.url}/v1/models`);
    await simRequest(`${s.url}/health`);
    const stats = await s.stats();
    assert.equal(stats.requests, 4, '/health and /__sim are not /v1 requests');
    assert.equal(stats.completed, 4);
    assert.deepEqual(stats.by_path, { '/v1/chat/completions': 3, '/v1/models': 1 });
    assert.deepEqual(stats.by_session, { s1: 2, s2: 1 });
  });
});
