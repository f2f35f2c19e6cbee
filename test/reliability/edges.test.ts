/**
 * Issue 19: hostile input at the edges. Every session id the data plane accepts can be managed;
 * admin bodies have a depth limit; the token is checked before anything reads the request, and
 * every refused mutating call is audited; Fastify's and Node's refusals are in the router's error
 * shapes; a client that leaves before the response starts is 499; request bodies have a memory
 * budget (`--body-memory`); and the three smaller decisions (no Unicode whitespace in
 * Authorization, the escaped `session_id` key, garbage pipelined after a request).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { spawnSim, simRequest, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { parseProm, sum } from '../support/prom.js';
import { rawExchange } from '../support/raw-http.js';
import { BodyReader } from '../../src/modules/proxy/body-reader.service.js';

const MAX_BODY = 1024 * 1024;
const UPLOAD = 900 * 1024;
const chat = (extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });
const audits = (r: TestRouter) => r.logs().filter((l) => l['event'] === 'audit');
const requestLine = (r: TestRouter, id: string) => r.waitForLog((l) => l['event'] === 'request' && l['reqId'] === id);
const deep = (n: number): string => '['.repeat(n) + ']'.repeat(n);

/** A POST of `size` bytes with a declared length, answered whenever the router answers. */
function upload(url: string, size: number, id: string): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve) => {
    const req = request(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(size), 'x-request-id': id },
    });
    req.on('response', (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    // A refused upload is cut by the router while it is still being written: the answer came first.
    req.on('error', () => resolve({ status: 0, headers: {}, body: '' }));
    const prompt = JSON.stringify({ model: 'sim-model', max_tokens: 1, prompt: 'x'.repeat(size - 60) });
    req.end(Buffer.from(prompt.padEnd(size, ' ')).subarray(0, size));
  });
}

describe('hostile input at the edges (issue 19)', () => {
  let sim: SimProcess;
  let router: TestRouter;
  const scrape = async () => parseProm((await simRequest(`${router.url}/metrics`)).body.toString()).samples;
  before(async () => {
    sim = await spawnSim({ name: 'e0' });
    router = await startTestRouter(
      { replicas: [{ name: 'e0', host: '127.0.0.1', port: sim.port }] },
      ['--max-body', String(MAX_BODY), '--body-memory', String(2 * UPLOAD + 1024)],
      { ROUTER_ADMIN_TOKEN: TEST_TOKEN },
    );
    await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas[0].ready === true, 5_000, 'e0 ready');
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  it('GET, PUT and DELETE /sessions/<128 characters> work as for a short id; a longer id is managed under its h-<sha256> replacement', async () => {
    for (const id of ['short-1', 'L'.repeat(128)]) {
      const pin = await adminCall(router, 'PUT', `/sessions/${id}`, { body: { replica: 'e0' } });
      assert.equal(pin.status, 200, `${id.length}: ${JSON.stringify(pin.body)}`);
      assert.equal(pin.body.id, id);
      const got = await adminCall(router, 'GET', `/sessions/${id}`);
      assert.deepEqual([got.status, got.body.replica], [200, 'e0']);
      assert.equal((await adminCall(router, 'DELETE', `/sessions/${id}`)).status, 204);
      assert.equal((await adminCall(router, 'GET', `/sessions/${id}`)).status, 404);
    }
    // The data plane pins a 300-character id under its replacement; the admin API finds it by the id the client sent.
    const long = 'q'.repeat(300);
    const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': long }, body: chat() });
    assert.equal(r.status, 200);
    const got = await adminCall(router, 'GET', `/sessions/${long}`);
    assert.deepEqual([got.status, got.body.id], [200, r.headers['x-session-id']]);
    assert.equal((await adminCall(router, 'DELETE', `/sessions/${long}`)).status, 204);
  });

  it('answers a body nested 100,000 levels deep on every admin body route with 400 naming the limit, and logs no stack', async () => {
    for (const [method, path] of [
      ['POST', '/replicas'],
      ['PATCH', '/replicas/e0'],
      ['PUT', '/sessions/deep'],
    ] as const) {
      for (const body of [deep(100_000), deep(2_000), `{"replica":${deep(5_000)}}`, `{"a":`.repeat(3_000) + '1' + '}'.repeat(3_000)]) {
        const r = await adminCall(router, method, path, { body });
        assert.equal(r.status, 400, `${method} ${path}: ${JSON.stringify(r.body).slice(0, 200)}`);
        assert.match(String(r.headers['content-type']), /application\/problem\+json/);
        assert.equal(r.body.type, 'urn:affinity-router:error:body_too_deep');
        assert.match(r.body.detail, /more than 32 levels deep/);
      }
    }
    const text = JSON.stringify(router.logs());
    assert.doesNotMatch(text, /RangeError|Maximum call stack|"stack"/);
  });

  it('answers 401 without a token whatever the body, content type or path, with one audit line each', async () => {
    const cases: Array<[string, string, Record<string, string>, string | Buffer | undefined]> = [
      ['PUT', '/sessions/x', { 'content-type': 'application/json' }, '{not json'],
      ['PATCH', '/replicas/e0', { 'content-type': 'application/json' }, Buffer.alloc(2 * 1024 * 1024, 0x20)],
      ['POST', '/replicas', { 'content-type': 'application/xml' }, '<count>1</count>'],
      ['DELETE', `/sessions/${'p'.repeat(1_000)}`, {}, undefined],
      ['DELETE', '/sessions/%zz', {}, undefined],
      ['PUT', '/sessions/x', { 'content-type': 'application/json' }, deep(100_000)],
      ['PATCH', '/%72eplicas/e0', { 'content-type': 'application/json' }, '{"draining":true}'],
      ['PATCH', '/replicas/e0', { 'content-type': 'application/json', authorization: `Bearer\u00a0${TEST_TOKEN}` }, '{"draining":true}'],
      ['PATCH', '/replicas/e0', { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKEN}\u00a0` }, '{"draining":true}'],
    ];
    for (const [method, path, headers, body] of cases) {
      const before = audits(router).length;
      const h: Record<string, string> = { ...headers };
      if (body !== undefined) h['content-length'] = String(Buffer.byteLength(body));
      const r = await simRequest(`${router.url}${path}`, { method, headers: h, body });
      const what = `${method} ${path.slice(0, 40)}`;
      assert.equal(r.status, 401, `${what}: ${r.body.toString().slice(0, 200)}`);
      assert.match(String(r.headers['content-type']), /application\/problem\+json/);
      assert.equal(r.headers['www-authenticate'], 'Bearer');
      const lines = await waitFor(() => audits(router).length > before && audits(router).slice(before), 10_000, `the audit line of ${what}`);
      assert.equal(lines.length, 1, what);
      assert.deepEqual([lines[0]['who'], lines[0]['result']], ['unauthenticated', 'http_401']);
    }
    assert.equal((await adminCall(router, 'GET', '/replicas')).body.replicas[0].draining, false, 'nothing changed');
  });

  it("answers Fastify's and Node's own refusals as problem+json with a stable type (the OpenAI shape on /v1/), and audits refused mutating calls", async () => {
    const auth = `Authorization: Bearer ${TEST_TOKEN}\r\n`;
    const badUrl = await rawExchange(router.url, `DELETE /sessions/%zz HTTP/1.1\r\nHost: x\r\n${auth}\r\n`, { expect: 1 });
    assert.equal(badUrl.responses[0]?.status, 400);
    assert.match(badUrl.responses[0].headers['content-type'], /application\/problem\+json/);
    assert.equal(JSON.parse(badUrl.responses[0].body).type, 'urn:affinity-router:error:bad_url');
    await router.waitForLog((l) => l['event'] === 'audit' && l['what'] === 'DELETE /sessions/%zz' && l['result'] === 'http_400');
    for (const [status, type] of [
      [413, 'body_too_large'],
      [415, 'unsupported_media_type'],
    ] as const) {
      const r = await simRequest(`${router.url}/replicas/e0`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': status === 415 ? 'text/xml' : 'application/json' },
        body: status === 413 ? Buffer.alloc(2 * 1024 * 1024, 0x20) : '<a/>',
      });
      assert.equal(r.status, status);
      assert.equal(JSON.parse(r.body.toString()).type, `urn:affinity-router:error:${type}`);
      await router.waitForLog((l) => l['event'] === 'audit' && l['what'] === 'PATCH /replicas/e0' && l['result'] === `http_${status}`);
    }
    const big = `X-Big: ${'b'.repeat(20_000)}\r\n`;
    const admin431 = await rawExchange(router.url, `GET /replicas HTTP/1.1\r\nHost: x\r\n${big}\r\n`, { expect: 1 });
    assert.equal(admin431.responses[0]?.status, 431);
    assert.equal(JSON.parse(admin431.responses[0].body).type, 'urn:affinity-router:error:headers_too_large');
    const garbage = await rawExchange(router.url, 'GET /replicas HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n', { expect: 1 });
    assert.equal(garbage.responses[0]?.status, 400);
    assert.equal(JSON.parse(garbage.responses[0].body).type, 'urn:affinity-router:error:malformed_request');
    const v1 = await rawExchange(router.url, `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`, { expect: 1 });
    assert.equal(v1.responses[0]?.status, 400);
    assert.match(v1.responses[0].headers['content-type'], /^application\/json/);
    assert.deepEqual(Object.keys(JSON.parse(v1.responses[0].body)).sort(), ['code', 'message', 'object', 'type']);
    const notFound = await adminCall(router, 'GET', '/nowhere', { token: null });
    assert.deepEqual([notFound.status, notFound.body.type], [404, 'urn:affinity-router:error:not_found']);
  });

  it('records a client that leaves before the response starts as 499 in the log and /metrics, before the body is complete and while the replica works; after the stream started, as its status', async () => {
    const head = (id: string, length: number, extra = '') =>
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nX-Request-Id: ${id}\r\n${extra}\r\n`;
    const before499 = sum(await scrape(), 'affinity_router_requests_total', { status: '499' });
    // 1. before the body is complete
    await rawExchange(router.url, head('abort-body', 1_000) + '{"model":', { abortAfterMs: 300 });
    // 2. while waiting for the replica's answer
    await sim.setFaults({ slow_ms: 3_000 });
    const body = chat();
    await rawExchange(router.url, head('abort-wait', body.length) + body, { abortAfterMs: 300 });
    // 3. during the stream (its 200 was already sent)
    await sim.setFaults({ slow_ms: 200 });
    const sbody = chat({ stream: true, max_tokens: 50 });
    const streamed = await rawExchange(router.url, head('abort-stream', sbody.length) + sbody, { abortAfterMs: 700 });
    await sim.setFaults({ reset: true });
    assert.match(streamed.text, /^HTTP\/1\.1 200/);
    const [b, w, s] = await Promise.all(['abort-body', 'abort-wait', 'abort-stream'].map((id) => requestLine(router, id)));
    assert.deepEqual([b['status'], b['cause'], b['bytes_out']], [499, 'client_abort', 0]);
    assert.deepEqual([w['status'], w['cause'], w['replica']], [499, 'client_abort', 'e0']);
    assert.deepEqual([s['status'], s['cause']], [200, 'client_abort']);
    const samples = await scrape();
    assert.equal(sum(samples, 'affinity_router_requests_total', { status: '499' }) - before499, 2, 'the metric agrees with the log');
    assert.equal(sum(samples, 'affinity_router_requests_total', { status: '200', replica: 'none' }), 0, 'no abort counted as a 200');
    await waitFor(async () => sum(await scrape(), 'affinity_router_replica_inflight') === 0, 5_000, 'in-flight back to 0');
  });

  it('refuses a body that does not fit in --body-memory with 503 overloaded and Retry-After before reading it, and answers the bodies it holds', async () => {
    const budget = router.app.get(BodyReader);
    const before = (await sim.stats()).requests;
    await sim.setFaults({ slow_ms: 3_000 });
    const held = [upload(router.url, UPLOAD, 'held-1'), upload(router.url, UPLOAD, 'held-2')];
    await waitFor(() => budget.inUse === 2 * UPLOAD, 10_000, 'two bodies held');
    const refused = await upload(router.url, UPLOAD, 'over-budget');
    assert.equal(refused.status, 503, refused.body);
    assert.equal(refused.headers['retry-after'], '1');
    assert.equal(JSON.parse(refused.body).code, 'overloaded');
    assert.match(JSON.parse(refused.body).message, /--body-memory/);
    const answers = await Promise.all(held);
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200],
    );
    await sim.setFaults({ reset: true });
    await waitFor(() => budget.inUse === 0, 5_000, 'the budget given back');
    assert.equal((await upload(router.url, UPLOAD, 'after')).status, 200, 'room again once the held bodies are answered');
    assert.equal((await sim.stats()).requests - before, 3, 'the refused body reached no replica');
    const line = await requestLine(router, 'over-budget');
    assert.deepEqual([line['status'], line['cause'], line['bytes_in']], [503, 'rejected', 0]);
  });

  it('decisions: the escaped key "session\\u005fid" is not a session field; garbage after a pipelined request gets that request\'s answer first', async () => {
    const esc = Buffer.from('{"session\\u005fid":"escaped-1","model":"sim-model","prompt":"hi","max_tokens":1}');
    const r = await simRequest(`${router.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: esc });
    assert.equal(r.status, 200);
    assert.notEqual(r.headers['x-session-id'], 'escaped-1', 'a minted session: the router matches the key as written');
    const body = chat();
    const first = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const x = await rawExchange(router.url, first + 'NOT HTTP AT ALL\r\n\r\n');
    assert.deepEqual(
      x.responses.map((res) => res.status),
      [200, 400],
      x.text.slice(0, 300),
    );
    assert.equal(x.closed, true);
  });
});
