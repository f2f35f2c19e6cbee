/**
 * Issue 7, scenario 7: hostile session ids and echoed values. Every id is answered, the echoed
 * X-Session-Id is header-safe and the same on every turn, the replica is sent only that safe id,
 * and no echoed value can inject a header. Raw sockets send the exact bytes (Node's client refuses
 * non-UTF-8 header bytes).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { spawnSim, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, type TestRouter } from '../support/router.js';

const SAFE = /^[A-Za-z0-9._:-]{1,128}$/;
const hashed = (bytes: Buffer): string => 'h-' + createHash('sha256').update(bytes).digest('hex').slice(0, 32);

interface Raw {
  status: number;
  headers: Array<[string, string]>;
  body: Buffer;
}

/** Writes `bytes` on a fresh connection and parses the (Content-Length) response. */
function raw(url: string, bytes: Buffer): Promise<Raw> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), hostname, () => s.write(bytes));
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => s.destroy(new Error(`no complete answer in 10 s: ${buf.toString('latin1')}`)), 10_000);
    const parse = (): Raw | undefined => {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return undefined;
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      const headers = lines.slice(1).map((l): [string, string] => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]);
      const length = Number(headers.find(([n]) => n === 'content-length')?.[1] ?? NaN);
      const body = buf.subarray(end + 4);
      return body.length >= length ? { status: Number(lines[0].split(' ')[1]), headers, body: body.subarray(0, length) } : undefined;
    };
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const r = parse();
      if (r !== undefined) {
        clearTimeout(timer);
        s.destroy();
        resolve(r);
      }
    });
    s.on('error', reject);
    s.on('close', () => reject(new Error(`closed before a complete answer: ${JSON.stringify(buf.toString('latin1'))}`)));
  });
}

/** A chat POST with exact extra header bytes (each line ending in CRLF) and a JSON body. */
function post(path: string, headerBytes: Buffer, body: Record<string, unknown>): Buffer {
  const b = Buffer.from(JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1, ...body }));
  return Buffer.concat([
    Buffer.from(`POST ${path} HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nContent-Length: ${b.length}\r\n`, 'latin1'),
    headerBytes,
    Buffer.from('\r\n'),
    b,
  ]);
}
const sessionHeader = (value: Buffer): Buffer => Buffer.concat([Buffer.from('X-Session-Id: '), value, Buffer.from('\r\n')]);
const get = (r: Raw, name: string): string | undefined => r.headers.find(([n]) => n === name)?.[1];

describe('hostile session ids and echoed values (issue 7 §7)', () => {
  let sims: SimProcess[];
  let router: TestRouter;
  before(async () => {
    sims = await Promise.all(['i0', 'i1'].map((name) => spawnSim({ name })));
    router = await startTestRouter({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })) }, [], { ROUTER_ADMIN_TOKEN: TEST_TOKEN });
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  const cases: Array<{ name: string; header?: Buffer; body?: unknown; expect: string }> = [
    { name: '10 KB header', header: Buffer.alloc(10 * 1024, 'a'), expect: hashed(Buffer.alloc(10 * 1024, 'a')) },
    { name: '10 KB body field', body: 'b'.repeat(10 * 1024), expect: hashed(Buffer.from('b'.repeat(10 * 1024))) },
    { name: 'CR/LF in the body field (a header cannot carry them)', body: 'x\r\nSet-Cookie: pwned=1', expect: hashed(Buffer.from('x\r\nSet-Cookie: pwned=1')) },
    { name: 'NUL in the body field', body: 'a\u0000b', expect: hashed(Buffer.from('a\u0000b')) },
    {
      name: 'non-UTF-8 header bytes',
      header: Buffer.from([0xff, 0xfe, 0x80, 0x41, 0xc3, 0x28]),
      expect: hashed(Buffer.from([0xff, 0xfe, 0x80, 0x41, 0xc3, 0x28])),
    },
    { name: 'UTF-8 unicode header bytes', header: Buffer.from('セッション-🚀', 'utf8'), expect: hashed(Buffer.from('セッション-🚀', 'utf8')) },
    { name: 'unicode body field', body: 'ünïcödé 🚀 セッション', expect: hashed(Buffer.from('ünïcödé 🚀 セッション', 'utf8')) },
    { name: 'lone surrogate in the body field', body: '\ud800x', expect: hashed(Buffer.from('\ud800x', 'utf8')) },
    { name: 'header and body disagree (valid header wins)', header: Buffer.from('hdr-1'), body: 'body-1', expect: 'hdr-1' },
    { name: 'invalid header, valid body (body wins)', header: Buffer.from('bad id!'), body: 'body-2', expect: 'body-2' },
    { name: 'both invalid (header hashed)', header: Buffer.from('bad id!'), body: 'bad body!', expect: hashed(Buffer.from('bad id!')) },
  ];

  for (const c of cases) {
    it(`answers 200 with a stable header-safe id: ${c.name}`, async () => {
      const bytes = post(
        '/v1/chat/completions',
        c.header === undefined ? Buffer.alloc(0) : sessionHeader(c.header),
        c.body === undefined ? {} : { session_id: c.body },
      );
      const first = await raw(router.url, bytes);
      const second = await raw(router.url, bytes);
      assert.equal(first.status, 200, first.body.toString());
      assert.equal(second.status, 200);
      const id = get(first, 'x-session-id');
      assert.match(String(id), SAFE);
      assert.equal(id, c.expect);
      assert.equal(get(second, 'x-session-id'), id, 'deterministic across turns');
      assert.equal(get(second, 'x-replica-name'), get(first, 'x-replica-name'), 'same replica');
      assert.equal(get(second, 'x-router-affinity'), 'retain');
      const sim = sims.find((s) => s.name === get(second, 'x-replica-name'))!;
      assert.equal((await sim.stats()).last_request?.headers['x-session-id'], id, 'the replica is sent the safe id only');
    });
  }

  it('refuses NUL, bare CR/LF and folded lines inside raw headers with 400 (RFC 9110 §5.5), and nothing reaches a replica', async () => {
    const before = (await Promise.all(sims.map((s) => s.stats()))).reduce((n, s) => n + s.requests, 0);
    for (const bad of [
      'X-Session-Id: a\u0000b\r\n',
      'X-Request-Id: abc\rX-Evil: 1\r\n',
      'X-Request-Id: abc\nX-Evil: 1\r\n',
      'X-Request-Id: abc\r\n X-Evil: 1\r\n',
    ]) {
      const r = await raw(router.url, post('/v1/chat/completions', Buffer.from(bad, 'latin1'), {}));
      assert.equal(r.status, 400, JSON.stringify(bad));
      assert.equal(
        r.headers.some(([n]) => n === 'x-evil'),
        false,
      );
    }
    const afterCount = (await Promise.all(sims.map((s) => s.stats()))).reduce((n, s) => n + s.requests, 0);
    assert.equal(afterCount, before);
  });

  it('never echoes an unsafe X-Request-Id: spaces, quotes, CR/LF-looking text, non-ASCII and over-long values are replaced', async () => {
    const values = ['a b', 'a"b', 'x%0d%0aSet-Cookie:%20a=1', 'caf\u00e9', 'a'.repeat(129), '<script>', 'a;b=c', '\t'];
    for (const v of values) {
      const r = await raw(router.url, post('/v1/chat/completions', Buffer.from(`X-Request-Id: ${v}\r\n`, 'latin1'), {}));
      assert.equal(r.status, 200);
      const echoed = String(get(r, 'x-request-id'));
      assert.match(echoed, SAFE, JSON.stringify(v));
      assert.notEqual(echoed, v);
      assert.equal(
        r.headers.some(([n]) => n === 'set-cookie'),
        false,
      );
    }
    const kept = await raw(router.url, post('/v1/chat/completions', Buffer.from('X-Request-Id: req-ok.1:2\r\n'), {}));
    assert.equal(get(kept, 'x-request-id'), 'req-ok.1:2');
  });

  it('no response header can be injected through a body session id, an admin path or a replica name', async () => {
    const viaBody = await raw(router.url, post('/v1/chat/completions', Buffer.alloc(0), { session_id: 'a\r\nSet-Cookie: pwned=1\r\nX-Evil: 1' }));
    assert.equal(viaBody.status, 200);
    for (const path of ['/sessions/x%0D%0ASet-Cookie:%20pwned=1', '/replicas/x%0D%0AX-Evil:%201', '/sessions/%E2%80%A8x%0Ax']) {
      for (const method of ['GET', 'DELETE', 'PUT']) {
        const r = await adminCall(router, method, path, method === 'PUT' ? { body: { replica: 'x\r\nX-Evil: 1' } } : {});
        // An invalid session id is looked up under its h-<sha256> replacement (as the data plane stores it), so it may exist.
        assert.ok(r.status < 500, `${method} ${path}: ${r.status}`);
        assert.equal(r.headers['set-cookie'], undefined);
        assert.equal(r.headers['x-evil'], undefined);
      }
    }
    assert.equal(
      viaBody.headers.some(([n]) => n === 'set-cookie' || n === 'x-evil'),
      false,
    );
    for (const [, v] of viaBody.headers) assert.equal(/[\r\n\0]/.test(v), false);
  });
});
