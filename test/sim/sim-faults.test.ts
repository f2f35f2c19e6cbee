/** Every fault switch of a real simulator process, set by POST /__sim/faults or by flag. */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, afterEach, before, describe, it } from 'node:test';
import { freePort, tcpProbe, simRequest, simStream, spawnSim, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { pollUntil } from './poll-until.js';

type Json = Record<string, unknown>;
const chatBody = (extra: Json = {}): string => JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...extra });
const streamBody = (maxTokens = 10): string => chatBody({ stream: true, max_tokens: maxTokens });

/** Sends a request, and reports what the client saw: headers, bytes of body, and how it ended. */
function rawExchange(url: string, body: string): { seen: { status: number; bytes: number; length: number; ended: string | null }; abort(): void } {
  const seen = { status: 0, bytes: 0, length: -1, ended: null as string | null };
  const req = request(url, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
    seen.status = res.statusCode ?? 0;
    seen.length = Number(res.headers['content-length'] ?? -1);
    res.on('data', (c: Buffer) => (seen.bytes += c.length));
    res.on('end', () => (seen.ended ??= 'end'));
    res.on('error', () => (seen.ended ??= 'error'));
    res.on('close', () => (seen.ended ??= res.complete ? 'end' : 'error'));
  });
  req.on('error', () => (seen.ended ??= 'error'));
  req.end(body);
  return { seen, abort: () => req.destroy() };
}

describe('simulator faults', () => {
  let sim: SimProcess;
  before(async () => {
    sim = await spawnSim({ name: 'faulty' });
  });
  afterEach(() => sim.setFaults({ reset: true }));
  after(stopAllSims);

  it('status: answers every /v1 request with that status and an OpenAI error, /__sim and /health unaffected', async () => {
    await sim.setFaults({ status: 503 });
    for (const path of ['/v1/chat/completions', '/v1/models', '/v1/embeddings']) {
      const res = path === '/v1/models' ? await simRequest(`${sim.url}${path}`) : await simRequest(`${sim.url}${path}`, { method: 'POST', body: chatBody() });
      assert.equal(res.status, 503, path);
      const body = JSON.parse(res.body.toString('utf8')) as Json;
      assert.deepEqual({ object: body.object, type: body.type, code: body.code }, { object: 'error', type: 'service_unavailable', code: 503 });
    }
    assert.equal((await simRequest(`${sim.url}/health`)).status, 200);
    await sim.setFaults({ reset: true });
    assert.equal((await simRequest(`${sim.url}/v1/chat/completions`, { method: 'POST', body: chatBody() })).status, 200);
  });

  it('status: set by --fault-status at start', async () => {
    const s = await spawnSim({ args: ['--fault-status', '502'] });
    const res = await simRequest(`${s.url}/v1/completions`, { method: 'POST', body: '{"prompt":"x"}' });
    assert.equal(res.status, 502);
    assert.equal((JSON.parse(res.body.toString('utf8')) as Json).type, 'bad_gateway');
  });

  it('hang headers: never answers, and counts the request aborted when the client leaves', async () => {
    await sim.setFaults({ hang: 'headers' });
    const before = await sim.stats();
    const ex = rawExchange(`${sim.url}/v1/chat/completions`, chatBody());
    await pollUntil(
      'request received',
      () => sim.stats(),
      (s) => s.requests === before.requests + 1 && s.inflight === 1,
    );
    // A served request would have been answered in the same tick that recorded it.
    assert.equal((await simRequest(`${sim.url}/health`)).status, 200);
    assert.equal(ex.seen.status, 0, 'no response headers');
    ex.abort();
    const s = await pollUntil(
      'aborted',
      () => sim.stats(),
      (st) => st.aborted === before.aborted + 1,
      10_000,
    );
    assert.equal(s.inflight, 0);
  });

  it('hang body: a stream sends headers and two chunks, then stalls', async () => {
    await sim.setFaults({ hang: 'body' });
    const stream = await simStream(`${sim.url}/v1/chat/completions`, { body: streamBody() });
    assert.equal(stream.status, 200);
    await stream.waitForEvents(2);
    await assert.rejects(stream.waitForEvents(3, 300), /2 of 3 events within 300 ms/);
    stream.destroy();
    assert.equal(await stream.done, 'destroyed');
    await pollUntil(
      'aborted counted',
      () => sim.stats(),
      (st) => st.inflight === 0 && st.aborted >= 1,
      10_000,
    );
  });

  it('hang body: a non-stream answer sends headers and half its body, then stalls', async () => {
    await sim.setFaults({ hang: 'body' });
    const ex = rawExchange(`${sim.url}/v1/chat/completions`, chatBody());
    await pollUntil(
      'half the body',
      () => Promise.resolve(ex.seen),
      (s) => s.length > 0 && s.bytes === Math.floor(s.length / 2),
    );
    assert.equal(ex.seen.status, 200);
    assert.equal(ex.seen.ended, null);
    ex.abort();
  });

  it('die_after_chunks: the process exits(1) after N chunks', async () => {
    const s = await spawnSim({ name: 'doomed' });
    await s.setFaults({ die_after_chunks: 3 });
    const stream = await simStream(`${s.url}/v1/chat/completions`, { body: streamBody() });
    assert.equal(await stream.done, 'error');
    assert.equal(stream.events.length, 3);
    assert.ok(!stream.events.some((e) => e.data === '[DONE]'));
    assert.deepEqual(await s.exited(), { code: 1, signal: null });
    assert.equal(await tcpProbe(s.port), 'ECONNREFUSED');
  });

  it('reset_after_chunks: a stream is cut after N chunks and the process lives on', async () => {
    await sim.setFaults({ reset_after_chunks: 2 });
    const before = await sim.stats();
    const stream = await simStream(`${sim.url}/v1/chat/completions`, { body: streamBody() });
    assert.equal(await stream.done, 'error');
    assert.equal(stream.events.length, 2);
    const s = await pollUntil(
      'reset counted',
      () => sim.stats(),
      (st) => st.resets === before.resets + 1,
    );
    assert.equal(s.aborted, before.aborted, 'a cut by the simulator is not a client abort');
    assert.equal((await simRequest(`${sim.url}/health`)).status, 200);
  });

  it('reset_after_chunks: a non-stream answer is cut halfway', async () => {
    await sim.setFaults({ reset_after_chunks: 0 });
    await assert.rejects(simRequest(`${sim.url}/v1/chat/completions`, { method: 'POST', body: chatBody() }), /aborted|socket hang up|ECONNRESET/);
    const ex = rawExchange(`${sim.url}/v1/chat/completions`, chatBody());
    await pollUntil(
      'closed',
      () => Promise.resolve(ex.seen),
      (s) => s.ended !== null,
    );
    assert.equal(ex.seen.ended, 'error');
    assert.ok(ex.seen.bytes < ex.seen.length, `${ex.seen.bytes} of ${ex.seen.length} bytes`);
  });

  it('slow_ms: delays a non-stream answer and every chunk', async () => {
    await sim.setFaults({ slow_ms: 150 });
    const t0 = performance.now();
    assert.equal((await simRequest(`${sim.url}/v1/models`)).status, 200);
    assert.ok(performance.now() - t0 >= 140, 'non-stream answer delayed');
    const stream = await simStream(`${sim.url}/v1/chat/completions`, { body: streamBody(2) });
    assert.equal(await stream.done, 'end');
    const at = stream.events.map((e) => e.at);
    assert.ok((at[1] ?? 0) - (at[0] ?? 0) >= 140, 'second chunk delayed');
  });

  it('health: /health answers 503 not_ready while /v1 still works', async () => {
    await sim.setFaults({ health: 'not_ready' });
    const res = await simRequest(`${sim.url}/health`);
    assert.equal(res.status, 503);
    assert.deepEqual(JSON.parse(res.body.toString('utf8')), { status: 'not_ready' });
    assert.equal((await simRequest(`${sim.url}/v1/models`)).status, 200);
    await sim.setFaults({ health: 'ok' });
    assert.equal((await simRequest(`${sim.url}/health`)).status, 200);
  });

  it('refuse with refuse_ms: refuses connections, then listens again on the same port', async () => {
    // A port outside the ephemeral range: while it is closed no outgoing connection can take it.
    const s = await spawnSim({ port: await freePort() });
    await s.setFaults({ refuse: true, refuse_ms: 700 });
    await pollUntil(
      'refused',
      () => tcpProbe(s.port),
      (r) => r === 'ECONNREFUSED',
      1_000,
    );
    await pollUntil(
      'listening again',
      () => tcpProbe(s.port),
      (r) => r === 'open',
      5_000,
    );
    const stats = await s.stats();
    assert.equal(stats.faults.refuse, false);
    assert.equal(stats.port, s.port);
  });

  it('--fault-refuse: does not listen until SIGUSR2, which toggles refusing', async () => {
    const port = await freePort();
    const s = await spawnSim({ port, args: ['--fault-refuse'] });
    assert.equal(s.port, port);
    assert.equal(await tcpProbe(port), 'ECONNREFUSED');
    s.child.kill('SIGUSR2');
    await pollUntil(
      'listening',
      () => tcpProbe(port),
      (r) => r === 'open',
    );
    assert.equal((await simRequest(`${s.url}/health`)).status, 200);
    s.child.kill('SIGUSR2');
    await pollUntil(
      'refusing again',
      () => tcpProbe(port),
      (r) => r === 'ECONNREFUSED',
    );
  });

  it('refuses an invalid faults document with 400 and keeps the current faults', async () => {
    await sim.setFaults({ slow_ms: 1 });
    for (const body of ['{"explode":true}', '{"status":"bad"}', 'not json']) {
      const res = await simRequest(`${sim.url}/__sim/faults`, { method: 'POST', body });
      assert.equal(res.status, 400, body);
      assert.match(res.body.toString('utf8'), /invalid faults/);
    }
    assert.equal((await sim.stats()).faults.slow_ms, 1);
  });
});
