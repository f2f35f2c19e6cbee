/**
 * The /v1/ edge as an engine reads it (issue 26 items 4 and 6), against real simulator processes
 * serving two different models: a duplicated `model` key routes by the last one, a non-string
 * `model` is refused, compressed bodies are routed by their decoded model and forwarded as sent,
 * and dot segments, TRACE and CONNECT never reach a replica.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { connect } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { spawnSim, simRequest, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { startTestRouter, type TestRouter } from '../support/router.js';

/** One request with its path sent exactly as given (no URL normalisation on the client side). */
function rawRequest(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: Buffer,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: hostname, port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('the /v1/ edge reads bodies and paths as an engine does (issue 26)', () => {
  let sims: SimProcess[];
  let router: TestRouter;
  const seen = async (): Promise<number> => (await Promise.all(sims.map((s) => s.stats()))).reduce((n, s) => n + s.requests, 0);
  const post = (body: Buffer, headers: Record<string, string> = {}) =>
    simRequest(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 'edge', ...headers },
      body,
    });

  before(async () => {
    sims = await Promise.all([spawnSim({ name: 'alpha', args: ['--model', 'alpha'] }), spawnSim({ name: 'beta', args: ['--model', 'beta'] })]);
    router = await startTestRouter({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })) }, ['--max-body', '64KiB']);
    // Both model lists discovered, so routing by model is exact.
    for (const m of ['alpha', 'beta']) {
      for (let i = 0; i < 200; i++) {
        const r = await post(Buffer.from(JSON.stringify({ model: m, messages: [], max_tokens: 1 })), { 'x-session-id': `warm-${m}-${i}` });
        if (r.status === 200 && r.headers['x-replica-name'] === m) break;
        await new Promise((res) => setTimeout(res, 50));
      }
    }
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  it('routes a body with `model` twice by the last one, as JSON.parse and Python read it', async () => {
    for (const [body, want] of [
      ['{"model":"alpha","messages":[],"max_tokens":1,"model":"beta"}', 'beta'],
      ['{"model":"beta","model":"alpha","messages":[],"max_tokens":1}', 'alpha'],
    ]) {
      const r = await post(Buffer.from(body), { 'x-session-id': `dup-${want}` });
      assert.equal(r.status, 200, r.body.toString());
      assert.equal(r.headers['x-replica-name'], want, body);
    }
  });

  it('refuses a `model` that is not a string with 400 invalid_request_error naming its type; nothing is forwarded', async () => {
    for (const [value, type] of [
      ['7', 'number'],
      ['["alpha"]', 'array'],
      ['{"id":"alpha"}', 'object'],
      ['null', 'null'],
      ['true', 'boolean'],
    ]) {
      const before = await seen();
      const r = await post(Buffer.from(`{"model":${value},"messages":[]}`));
      assert.equal(r.status, 400, value);
      const err = JSON.parse(r.body.toString()) as { type: string; code: string; message: string };
      assert.equal(err.type, 'invalid_request_error');
      assert.equal(err.code, 'invalid_model');
      assert.match(err.message, new RegExp(`must be a string, got ${type}`));
      assert.equal(await seen(), before, `${value}: not forwarded`);
    }
  });

  it('routes gzip, deflate and br bodies by their decoded model and forwards the compressed bytes as sent', async () => {
    const plain = Buffer.from(JSON.stringify({ model: 'beta', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }));
    for (const [coding, bytes] of [
      ['gzip', gzipSync(plain)],
      ['deflate', deflateSync(plain)],
      ['br', brotliCompressSync(plain)],
    ] as const) {
      const r = await post(bytes, { 'content-encoding': coding, 'x-session-id': `enc-${coding}` });
      assert.equal(r.headers['x-replica-name'], 'beta', `${coding}: routed by the decoded model (${r.status} ${r.body.toString().slice(0, 200)})`);
      const last = (await sims[1].stats()).last_request;
      assert.equal(last?.body_sha256, createHash('sha256').update(bytes).digest('hex'), `${coding}: the compressed bytes, untouched`);
    }
  });

  it('refuses an unknown encoding (415), corrupt data (400) and a body that decodes past --max-body (413), forwarding none', async () => {
    const before = await seen();
    const cases: Array<[string, Buffer, number, RegExp]> = [
      ['zstd', Buffer.from('abc'), 415, /'zstd' is not supported/],
      ['gzip', Buffer.from('not gzip at all'), 400, /not valid gzip data/],
      ['gzip', gzipSync(Buffer.alloc(1024 * 1024, 0x20)), 413, /decodes to more than/],
    ];
    for (const [coding, body, status, message] of cases) {
      const r = await post(body, { 'content-encoding': coding });
      assert.equal(r.status, status, `${coding}: ${r.body.toString()}`);
      assert.match(r.body.toString(), message);
    }
    assert.equal(await seen(), before, 'nothing reached a replica');
  });

  it('refuses dot segments, raw or percent-encoded, with 400 and forwards nothing', async () => {
    const before = await seen();
    for (const path of [
      '/v1/../replicas',
      '/v1/%2e%2e/replicas',
      '/v1/./models',
      '/v1/.%2E/fleet',
      '/v1/models/..%2f..%2freplicas',
      '/v1/x/..\\..\\sessions',
    ]) {
      const r = await rawRequest(router.url, 'GET', path);
      assert.equal(r.status, 400, `${path}: ${r.text}`);
      assert.equal((JSON.parse(r.text) as { code: string }).code, 'invalid_path');
    }
    assert.equal(await seen(), before, 'no replica saw them');
    assert.equal((await rawRequest(router.url, 'GET', '/v1/models')).status, 200, 'a plain path still works');
  });

  it('answers TRACE with 405 and Allow, never forwarded, and CONNECT with a 405 answer instead of a silent close', async () => {
    const before = await seen();
    const trace = await rawRequest(router.url, 'TRACE', '/v1/models');
    assert.equal(trace.status, 405);
    assert.match(String(trace.headers['allow']), /POST/);
    assert.equal((JSON.parse(trace.text) as { code: string }).code, 'method_not_allowed');
    assert.equal(await seen(), before);
    const { port } = new URL(router.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const s = connect(Number(port), '127.0.0.1', () => s.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'));
      let text = '';
      s.on('data', (c: Buffer) => (text += c.toString()));
      s.on('end', () => resolve(text));
      s.on('error', reject);
    });
    assert.match(answer, /^HTTP\/1\.1 405 /);
    assert.match(answer, /method_not_allowed/);
  });
});
