import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';
import { simRequest } from '../support/sim-process.js';
import { startTestRouter, type TestRouter } from '../support/router.js';

/** What the engine does with a request that arrives on a connection that already served one. */
type OnReuse = 'answer' | 'close-silently' | 'close-after-headers';

/**
 * A bare engine that records every /v1 request it receives (body and connection number) and
 * can drop a reused keep-alive connection, as an engine whose idle timeout fired just as the
 * router picked the connection again would.
 */
function engine(): { server: http.Server; seen: Array<{ body: string; conn: number }>; setOnReuse(m: OnReuse): void } {
  const seen: Array<{ body: string; conn: number }> = [];
  const served = new WeakMap<Socket, number>();
  const ids = new WeakMap<Socket, number>();
  let conns = 0;
  let onReuse: OnReuse = 'answer';
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/health') return void res.end('{}');
      const socket = req.socket;
      if (!ids.has(socket)) ids.set(socket, ++conns);
      const before = served.get(socket) ?? 0;
      served.set(socket, before + 1);
      seen.push({ body: Buffer.concat(chunks).toString(), conn: ids.get(socket)! });
      if (before > 0 && onReuse === 'close-silently') return void socket.destroy();
      if (before > 0 && onReuse === 'close-after-headers') {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
        res.write('{"partial":');
        setImmediate(() => socket.destroy());
        return;
      }
      if (req.url === '/v1/extras') {
        // An informational answer first, then headers the router must not pass on as they are.
        res.writeEarlyHints({ link: '</style.css>; rel=preload' });
        res.setHeader('x-request-id', 'the-engine-id');
        res.setHeader('set-cookie', ['a=1', 'b=2']);
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ok: true, conn: ids.get(socket) }));
    });
  });
  return { server, seen, setOnReuse: (m) => (onReuse = m) };
}

const post = (router: TestRouter, body: string) =>
  simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': 's' }, body });

const e = engine();
let router: TestRouter;
before(async () => {
  await new Promise<void>((done) => e.server.listen(0, '127.0.0.1', done));
  const port = (e.server.address() as AddressInfo).port;
  router = await startTestRouter({ replicas: [{ name: 'raw', host: '127.0.0.1', port }] });
});
after(async () => {
  await router.close();
  await new Promise((done) => e.server.close(done));
});

describe('a reused upstream connection the replica already closed (staleReuse, contract §3 retries)', () => {
  it('sends the request again on a fresh connection when the reused one closed before any answer', async () => {
    e.setOnReuse('answer');
    const first = await post(router, '{"turn":1}');
    assert.equal(first.status, 200);
    const warmConn = e.seen.at(-1)!.conn;
    e.setOnReuse('close-silently');
    const mark = e.seen.length;
    const second = await post(router, '{"turn":2}');
    assert.equal(second.status, 200, second.body.toString());
    assert.equal(second.headers['x-router-replica'], 'raw');
    // The replica saw the request twice: once on the stale connection (dropped unanswered), once on a new one.
    const attempts = e.seen.slice(mark);
    assert.deepEqual(
      attempts.map((a) => a.body),
      ['{"turn":2}', '{"turn":2}'],
    );
    assert.equal(attempts[0].conn, warmConn);
    assert.notEqual(attempts[1].conn, warmConn);
    assert.equal((JSON.parse(second.body.toString()) as { conn: number }).conn, attempts[1].conn);
    // Nothing reached the replica's health: a stale connection says nothing about it.
    assert.equal(router.logs().filter((l) => l['event'] === 'unready').length, 0);
  });

  it('never replays a request whose response had started', async () => {
    e.setOnReuse('answer');
    assert.equal((await post(router, '{"turn":3}')).status, 200);
    e.setOnReuse('close-after-headers');
    const mark = e.seen.length;
    const cut = await post(router, '{"turn":4}').then(
      (r) => ({ status: r.status, body: r.body.toString(), error: undefined }),
      (err: Error) => ({ status: 0, body: '', error: err.message }),
    );
    // The client sees the response break (never a complete-looking answer) ...
    assert.ok(cut.error !== undefined, `the client got a whole answer: ${JSON.stringify(cut)}`);
    // ... and the replica received the request exactly once.
    assert.deepEqual(
      e.seen.slice(mark).map((a) => a.body),
      ['{"turn":4}'],
    );
  });
});

describe("the replica's response head as the client gets it", () => {
  it("skips an informational 103, answers with the final status, puts the router's X-Request-Id in place of the engine's and keeps each Set-Cookie", async () => {
    e.setOnReuse('answer');
    const res = await simRequest(`${router.url}/v1/extras`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 's' },
      body: '{}',
    });
    assert.equal(res.status, 200, res.body.toString());
    assert.equal((JSON.parse(res.body.toString()) as { ok: boolean }).ok, true);
    assert.notEqual(res.headers['x-request-id'], 'the-engine-id');
    assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    assert.deepEqual(res.headers['set-cookie'], ['a=1', 'b=2']);
    assert.equal(res.headers['x-router-replica'], 'raw');
  });
});
