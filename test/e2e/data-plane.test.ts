import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { spawnSim, simRequest, simStream, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { startTestRouter, waitFor, type TestRouter } from '../support/router.js';

describe('data plane (contract §3)', () => {
  let sim: SimProcess;
  let router: TestRouter;

  before(async () => {
    sim = await spawnSim({ name: 'only', args: ['--itl-ms', '100'] });
    router = await startTestRouter({ replicas: [{ name: 'only', host: '127.0.0.1', port: sim.port }] }, ['--max-body', '6MiB']);
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  it('forwards exactly the bytes received (sha256 over a 5 MiB body with unicode and odd whitespace)', async () => {
    const filler = ' \t\r\n  ünïcödé 日本語 \u2028 emoji 🚀 ' + Math.random().toString(36);
    const content = filler.repeat(Math.ceil((5 * 1024 * 1024) / Buffer.byteLength(filler)));
    const body = Buffer.from(`{ "model" : "sim-model",\n\t"messages":[{"role":"user","content":${JSON.stringify(content)}}] ,"max_tokens":1 }  \n`);
    const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(r.status, 200);
    const st = await sim.stats();
    assert.equal(st.last_request?.body_bytes, body.length);
    assert.equal(st.last_request?.body_sha256, createHash('sha256').update(body).digest('hex'));
    assert.equal(st.last_request?.headers['content-length'], String(body.length));
  });

  it('refuses a body over --max-body with 413 body_too_large before any replica sees it', async () => {
    const before = (await sim.stats()).requests;
    const r = await simRequest(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 'big', 'x-request-id': 'req-413' },
      body: Buffer.alloc(7 * 1024 * 1024, 0x20),
    });
    assert.equal(r.status, 413);
    assert.equal(r.headers['content-type'], 'application/json');
    const e = JSON.parse(r.body.toString()) as Record<string, unknown>;
    assert.deepEqual({ object: e['object'], type: e['type'], code: e['code'] }, { object: 'error', type: 'invalid_request_error', code: 'body_too_large' });
    assert.equal(typeof e['message'], 'string');
    // The router headers of contract §3, on an error answered before any routing: no replica was
    // chosen, so no X-Router-Replica, and the affinity decision is `none`.
    assert.equal(r.headers['x-session-id'], 'big');
    assert.equal(r.headers['x-request-id'], 'req-413');
    assert.equal(r.headers['x-router-affinity'], 'none');
    assert.equal(r.headers['x-router-replica'], undefined);
    assert.equal((await sim.stats()).requests, before);
  });

  it('relays a stream chunk by chunk: 20 token chunks 100 ms apart, then [DONE]', async () => {
    const s = await simStream(`${router.url}/v1/chat/completions`, {
      headers: { 'x-session-id': 'streamer' },
      body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 20, messages: [{ role: 'user', content: 'count' }] }),
    });
    assert.equal(s.status, 200);
    // All four router headers (contract §3) on the stream's response head.
    assert.equal(s.headers['x-session-id'], 'streamer');
    assert.equal(s.headers['x-router-replica'], 'only');
    assert.equal(s.headers['x-router-affinity'], 'initialize');
    const reqId = String(s.headers['x-request-id']);
    assert.match(reqId, /^[A-Za-z0-9._:-]{1,128}$/);
    assert.match(String(s.headers['content-type']), /^text\/event-stream/);
    assert.equal(await s.done, 'end');
    // The same request and session ids went upstream with the stream request.
    const seen = (await sim.stats()).last_request!.headers;
    assert.deepEqual([seen['x-request-id'], seen['x-session-id']], [reqId, 'streamer']);
    const ev = s.events;
    assert.equal(ev.at(-1)?.data, '[DONE]');
    // 20 token chunks, then the finish chunk (sent right after the last token)
    const chunks = ev.filter((e) => e.data !== '[DONE]').slice(0, 20);
    assert.equal(ev.length, 22);
    // chunk by chunk: arrivals spread over ~1.9 s at the replica's pace. A loaded 2-core machine may
    // deliver a late timer's chunk next to the following one, so judge the median gap, not each gap.
    assert.ok(chunks.at(-1)!.at - chunks[0].at > 1_500);
    const gaps = chunks
      .slice(1)
      .map((c, i) => c.at - chunks[i].at)
      .sort((a, b) => a - b);
    assert.ok(gaps[Math.floor(gaps.length / 2)] > 70, `median gap ${gaps[Math.floor(gaps.length / 2)]} ms`);
    assert.ok(gaps.filter((g) => g < 30).length <= 3, `bunched gaps: ${gaps.map(Math.round).join(',')}`);
  });

  it('relays each chunk as it arrives, without waiting for more: a replica that stalls after two chunks has both at the client', async () => {
    // Ordering instead of a first-chunk deadline: the replica writes its second chunk and then
    // nothing (hang: body), so the client can only hold both if the router forwarded each at once.
    await sim.setFaults({ hang: 'body' });
    try {
      const s = await simStream(`${router.url}/v1/chat/completions`, {
        body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 20, messages: [{ role: 'user', content: 'stall' }] }),
      });
      assert.equal(s.status, 200);
      await s.waitForEvents(2);
      assert.equal(s.events.length, 2);
      s.destroy();
    } finally {
      await sim.setFaults({ reset: true });
    }
    await waitFor(() => router.outstanding('only') === 0, 5_000, 'outstanding back to 0');
  });

  it('destroys the upstream request within 1 s of a client disconnect and frees the in-flight count', async () => {
    const aborted = (await sim.stats()).aborted;
    const s = await simStream(`${router.url}/v1/chat/completions`, {
      body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 100, messages: [{ role: 'user', content: 'long' }] }),
    });
    await s.waitForEvents(2);
    assert.equal(router.outstanding('only'), 1);
    const cut = performance.now();
    s.destroy();
    await waitFor(async () => (await sim.stats()).aborted === aborted + 1, 10_000, 'the simulator to count the abort');
    assert.ok(performance.now() - cut < 1_000);
    await waitFor(() => router.outstanding('only') === 0, 10_000, 'outstanding back to 0');
  });

  it('forwards every method under /v1 with the query string, X-Forwarded-* and without hop-by-hop headers', async () => {
    for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH']) {
      const body = method === 'GET' ? undefined : Buffer.from('{"input":"x"}');
      const r = await simRequest(`${router.url}/v1/embeddings/x?a=1&b=two`, {
        method,
        headers: {
          connection: 'keep-alive',
          'keep-alive': 'timeout=5',
          'x-custom': 'kept',
          authorization: 'Bearer upstream-key',
          ...(body ? { 'content-length': String(body.length) } : {}),
        },
        body,
      });
      assert.equal(r.status, 200, method);
      const echo = JSON.parse(r.body.toString()) as { method: string; path: string; query: string };
      assert.equal(echo.method, method);
      assert.equal(echo.path, '/v1/embeddings/x');
      assert.match(echo.query, /a=1&b=two/);
      const h = (await sim.stats()).last_request!.headers;
      assert.equal(h['x-custom'], 'kept');
      assert.equal(h['authorization'], 'Bearer upstream-key');
      assert.equal(h['keep-alive'], undefined);
      assert.equal(h['x-forwarded-for'], '127.0.0.1');
      assert.equal(h['x-forwarded-proto'], 'http');
      assert.equal(h['x-forwarded-port'], new URL(router.url).port);
      assert.equal(h['x-forwarded-host'], new URL(router.url).host);
      assert.equal(h['host'], `127.0.0.1:${sim.port}`);
    }
  });

  it('drops the request headers its Connection header names (RFC 9110 §7.6.1)', async () => {
    const r = await simRequest(`${router.url}/v1/embeddings`, {
      method: 'POST',
      headers: { connection: 'keep-alive, X-Hop-Secret,  x-other-hop', 'x-hop-secret': 's3cret', 'x-other-hop': '1', 'x-end-to-end': 'kept' },
      body: '{"input":"x"}',
    });
    assert.equal(r.status, 200);
    const h = (await sim.stats()).last_request!.headers;
    assert.equal(h['x-hop-secret'], undefined);
    assert.equal(h['x-other-hop'], undefined);
    assert.equal(h['x-end-to-end'], 'kept');
  });

  it('answers GET /v1/models with a query string from the discovered list, never forwarding the query', async () => {
    const r = await simRequest(`${router.url}/v1/models?limit=5&after=m%201`);
    assert.equal(r.status, 200);
    const body = JSON.parse(r.body.toString()) as { object: string; data: Array<{ id: string }> };
    assert.equal(body.object, 'list');
    assert.deepEqual(
      body.data.map((m) => m.id),
      ['sim-model'],
    );
    // The replica never saw the client's query: the answer came from model discovery's list.
    const last = (await sim.stats()).last_request;
    assert.notEqual(last?.query, 'limit=5&after=m%201');
  });

  it('relays GET /v1/models with the router headers', async () => {
    const r = await simRequest(`${router.url}/v1/models`);
    assert.equal(r.status, 200);
    const body = JSON.parse(r.body.toString()) as { data: Array<{ id: string }> };
    assert.equal(body.data[0]?.id, 'sim-model');
    assert.equal(r.headers['x-router-replica'], 'only');
    assert.match(String(r.headers['x-session-id']), /^[0-9a-f]{32}$/);
  });

  it('keeps an incoming X-Request-Id that is valid and replaces one that is not', async () => {
    const ok = await simRequest(`${router.url}/v1/models`, { headers: { 'x-request-id': 'req-123' } });
    assert.equal(ok.headers['x-request-id'], 'req-123');
    const bad = await simRequest(`${router.url}/v1/models`, { headers: { 'x-request-id': 'bad id\t' } });
    assert.notEqual(bad.headers['x-request-id'], 'bad id\t');
    assert.match(String(bad.headers['x-request-id']), /^[A-Za-z0-9._:-]{1,128}$/);
  });
});

describe('data plane failures (contract §3, §5)', () => {
  after(stopAllSims);

  it('ends a stream broken by a replica that dies with one error event and no [DONE]', async () => {
    const sim = await spawnSim({ name: 'dies', args: ['--itl-ms', '20'] });
    const router = await startTestRouter({ replicas: [{ name: 'dies', host: '127.0.0.1', port: sim.port }] });
    try {
      await sim.setFaults({ die_after_chunks: 3 });
      const s = await simStream(`${router.url}/v1/chat/completions`, {
        body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 50, messages: [{ role: 'user', content: 'x' }] }),
      });
      assert.equal(s.status, 200);
      await s.done;
      const data = s.events.map((e) => e.data);
      assert.equal(data.includes('[DONE]'), false);
      const errors = data.filter((d) => d.includes('"error"'));
      assert.equal(errors.length, 1);
      const last = JSON.parse(data.at(-1)!) as { error: { type: string; code: string } };
      assert.deepEqual([last.error.type, last.error.code], ['upstream_error', 'replica_disconnected']);
      assert.equal(data.length, 4);
      await waitFor(() => router.outstanding('dies') === 0, 10_000, 'outstanding back to 0');
    } finally {
      await router.close();
    }
  });

  it('answers GET /v1/models without waiting for a replica that hangs, from the lists discovery read', async () => {
    const hang = await spawnSim({ name: 'hang', args: ['--model', 'hang-model'] });
    const good = await spawnSim({ name: 'good' });
    const router = await startTestRouter(
      { replicas: [hang, good].map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })), health: { path: '/__sim/stats' } },
      ['--models-timeout', '5'],
    );
    try {
      const ids = async (): Promise<string[]> => {
        const r = await simRequest(`${router.url}/v1/models`);
        if (r.status !== 200) return [`status ${r.status}`];
        return (JSON.parse(r.body.toString()) as { data: Array<{ id: string }> }).data.map((m) => m.id).sort();
      };
      await waitFor(async () => (await ids()).length === 2, 10_000, 'both lists discovered');
      await hang.setFaults({ hang: 'headers' });
      // A per-call fan-out would wait up to --models-timeout (5 s) for the hanging replica.
      const t0 = performance.now();
      assert.deepEqual(await ids(), ['hang-model', 'sim-model']);
      const took = performance.now() - t0;
      assert.ok(took < 5_000, `took ${took} ms`);
    } finally {
      await router.close();
    }
  });

  it('cuts a non-stream request with 504 replica_timeout after --request-timeout and frees the replica', async () => {
    const sim = await spawnSim({ name: 'slow' });
    const router = await startTestRouter({ replicas: [{ name: 'slow', host: '127.0.0.1', port: sim.port }] }, ['--request-timeout', '0.5']);
    try {
      await sim.setFaults({ hang: 'headers' });
      const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', body: Buffer.from('{"messages":[]}') });
      assert.equal(r.status, 504);
      assert.equal((JSON.parse(r.body.toString()) as { code: string }).code, 'replica_timeout');
      // The router headers of contract §3 on a 504: the minted session, the replica tried, the decision.
      assert.equal(r.headers['x-router-replica'], 'slow');
      assert.match(String(r.headers['x-session-id']), /^[0-9a-f]{32}$/);
      assert.match(String(r.headers['x-request-id']), /^[A-Za-z0-9._:-]{1,128}$/);
      assert.equal(r.headers['x-router-affinity'], 'initialize');
      await waitFor(() => router.outstanding('slow') === 0, 10_000, 'outstanding back to 0');
      await waitFor(async () => (await sim.stats()).aborted >= 1, 10_000, 'the simulator to see the abort');
    } finally {
      await router.close();
    }
  });

  it('destroys the upstream request within 1 s when the client of a non-stream request disconnects, before or after the response head', async () => {
    const sim = await spawnSim({ name: 'gen', args: ['--itl-ms', '50'] });
    const router = await startTestRouter({ replicas: [{ name: 'gen', host: '127.0.0.1', port: sim.port }] }, ['--health-interval', '60']);
    /** Sends a non-stream chat and resolves once the simulator holds it; `destroy()` is the client going away. */
    const send = async (maxTokens: number): Promise<{ head: Promise<http.IncomingMessage>; destroy(): void }> => {
      const body = JSON.stringify({ model: 'sim-model', max_tokens: maxTokens, messages: [{ role: 'user', content: 'write a lot' }] });
      const req = http.request(`${router.url}/v1/chat/completions`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } });
      req.on('error', () => undefined); // our own destroy
      const head = new Promise<http.IncomingMessage>((ok) =>
        req.once('response', (res) => {
          res.on('error', () => undefined);
          ok(res);
        }),
      );
      req.end(body);
      await waitFor(async () => (await sim.stats()).inflight === 1, 5_000, 'the simulator to hold the request');
      assert.equal(router.outstanding('gen'), 1);
      return { head, destroy: () => req.destroy() };
    };
    const assertAbortSeen = async (aborted: number, cut: number): Promise<void> => {
      await waitFor(async () => (await sim.stats()).aborted === aborted + 1, 10_000, 'the simulator to count the abort');
      assert.ok(performance.now() - cut < 1_000, `abort seen ${Math.round(performance.now() - cut)} ms after the disconnect`);
      await waitFor(() => router.outstanding('gen') === 0, 10_000, 'outstanding back to 0');
      const st = await sim.stats();
      assert.deepEqual([st.inflight, st.completed], [0, 0]);
    };
    try {
      // 1. While the replica generates (400 tokens at 50 ms: 20 s), before any response byte.
      let aborted = (await sim.stats()).aborted;
      const generating = await send(400);
      let cut = performance.now();
      generating.destroy();
      await assertAbortSeen(aborted, cut);

      // 2. After the head and half the body arrived (the replica stalls mid-body).
      await sim.setFaults({ hang: 'body' });
      aborted = (await sim.stats()).aborted;
      const stalled = await send(4);
      // Generation (4 tokens) runs first; the head and half the body follow, then the stall.
      const res = await Promise.race([stalled.head, new Promise<undefined>((done) => setTimeout(() => done(undefined), 10_000))]);
      assert.ok(res, 'no response head within 10 s');
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['x-router-replica'], 'gen');
      await new Promise<void>((ok) => res.once('data', () => ok()));
      cut = performance.now();
      stalled.destroy();
      await assertAbortSeen(aborted, cut);
    } finally {
      await router.close();
    }
  });

  it('cuts a stalled stream after --stream-idle-timeout with a replica_timeout error event', async () => {
    const sim = await spawnSim({ name: 'stall' });
    const router = await startTestRouter({ replicas: [{ name: 'stall', host: '127.0.0.1', port: sim.port }] }, ['--stream-idle-timeout', '0.5']);
    try {
      await sim.setFaults({ hang: 'body' });
      const s = await simStream(`${router.url}/v1/chat/completions`, {
        body: JSON.stringify({ model: 'sim-model', stream: true, messages: [{ role: 'user', content: 'x' }] }),
      });
      await s.done;
      const last = JSON.parse(s.events.at(-1)!.data) as { error: { code: string } };
      assert.equal(last.error.code, 'replica_timeout');
      assert.equal(
        s.events.some((e) => e.data === '[DONE]'),
        false,
      );
      await waitFor(() => router.outstanding('stall') === 0, 10_000, 'outstanding back to 0');
    } finally {
      await router.close();
    }
  });
});

describe('data plane: what goes back to the client', () => {
  /** One request on `agent`; resolves with the status, headers, body and whether the socket was reused. */
  function call(url: string, agent: http.Agent): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string; reused: boolean }> {
    return new Promise((resolve, reject) => {
      const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString(), reused: req.reusedSocket }));
      });
      req.on('error', reject);
      req.end('{"messages":[]}');
    });
  }

  it("drops the replica's hop-by-hop headers, keeps its others, overrides spoofed router headers, and keeps the client connection open after an upstream Connection: close", async () => {
    // A bare engine that closes every connection and sends hop-by-hop headers the client must not see.
    const engine = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, {
          'content-type': 'application/json',
          connection: 'close, X-Engine-Hop',
          'x-engine-hop': 'private',
          'keep-alive': 'timeout=1, max=1',
          'proxy-connection': 'close',
          'x-engine': 'raw',
          'x-router-replica': 'spoofed',
        });
        res.end(req.url === '/health' ? '{}' : '{"ok":true}');
      });
    });
    await new Promise<void>((done) => engine.listen(0, '127.0.0.1', done));
    const port = (engine.address() as AddressInfo).port;
    const router = await startTestRouter({ replicas: [{ name: 'raw', host: '127.0.0.1', port }] });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const first = await call(`${router.url}/v1/chat/completions`, agent);
      assert.equal(first.status, 200);
      assert.equal(first.body, '{"ok":true}');
      assert.equal(first.headers['x-engine'], 'raw');
      assert.equal(first.headers['x-router-replica'], 'raw');
      assert.equal(first.headers['proxy-connection'], undefined);
      assert.equal(first.headers['x-engine-hop'], undefined, 'a header the replica named in Connection is hop-by-hop');
      assert.notEqual(first.headers['connection'], 'close');
      assert.notEqual(first.headers['keep-alive'], 'timeout=1, max=1');
      // The replica closed its side; the client's connection to the router is still good.
      const second = await call(`${router.url}/v1/chat/completions`, agent);
      assert.equal(second.status, 200);
      assert.equal(second.reused, true);
    } finally {
      agent.destroy();
      await router.close();
      await new Promise((done) => engine.close(done));
    }
  });
});
