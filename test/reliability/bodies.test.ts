/**
 * Issue 7, scenario 8: bodies and slow or oversized clients. Odd bodies are the replica's
 * business (forwarded byte for byte, answered by it); a declared 100 MB body and a chunked body
 * over `--max-body` get 413 before being read; slowloris clients are cut after
 * `--header-timeout` / `--body-timeout` while others are served; huge header blocks get 431.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { spawnSim, simRequest, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { startTestRouter, type TestRouter } from '../support/router.js';
import { accounting } from './load.js';

const MAX_BODY = 64 * 1024;

interface Raw {
  status: number;
  text: string;
  /** The server closed the connection. */
  closed: boolean;
  ms: number;
  /** performance.now() of the answer (or the close): `ms` after the connection was opened. */
  endedAt: number;
  /** Bytes written by `feed` before the answer (or close). */
  sent: number;
}

/**
 * Opens a connection, lets `feed` write (it may take its time and should stop once `stopped()`),
 * and resolves at the first status line plus a short grace, at the close, or after `waitMs`.
 */
function raw(url: string, feed: (write: (b: Buffer | string) => void, stopped: () => boolean) => Promise<void>, waitMs = 10_000): Promise<Raw> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const s: Socket = connect(Number(port), hostname);
    let text = '';
    let sent = 0;
    let answeredAt = 0;
    let done = false;
    const t0 = performance.now();
    const finish = (closed: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      const endedAt = answeredAt || performance.now();
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text, closed, ms: endedAt - t0, endedAt, sent });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    s.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (answeredAt === 0 && text.includes('\r\n\r\n')) answeredAt = performance.now();
    });
    s.on('error', () => finish(true));
    s.on('close', () => finish(true));
    s.on('connect', () => {
      // A feed that throws fails the test (a no-op once the answer resolved it).
      feed(
        (b) => {
          if (!s.destroyed && !s.writableEnded) {
            sent += Buffer.byteLength(b);
            s.write(b);
          }
        },
        () => done || answeredAt > 0,
      ).catch(reject);
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('bodies and slow clients (issue 7 §8)', () => {
  let sims: SimProcess[];
  let router: TestRouter;
  const replicaRequests = async (): Promise<number> => (await Promise.all(sims.map((s) => s.stats()))).reduce((n, s) => n + s.requests, 0);
  before(async () => {
    sims = await Promise.all(['b0', 'b1'].map((name) => spawnSim({ name })));
    router = await startTestRouter({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })), health: { fall: 1 } }, [
      '--max-body',
      '64KiB',
      '--header-timeout',
      '1',
      '--body-timeout',
      '2',
      '--health-interval',
      '60',
    ]);
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  it('forwards empty, invalid-JSON and wrongly typed session_id bodies byte for byte; the replica answers, the router adds no error', async () => {
    const bodies: Array<[string, Buffer, number]> = [
      ['empty', Buffer.alloc(0), 400],
      ['invalid JSON', Buffer.from('{"session_id": "abc", "messages": ['), 400],
      ['not an object', Buffer.from('[1,2,3]'), 400],
      ['session_id number', Buffer.from('{"session_id": 42, "messages": [], "max_tokens": 1}'), 200],
      ['session_id object', Buffer.from('{"session_id": {"id": "x"}, "messages": [], "max_tokens": 1}'), 200],
      ['session_id null', Buffer.from('{"session_id": null, "messages": [], "max_tokens": 1}'), 200],
      ['session_id list', Buffer.from('{"session_id": ["a"], "messages": [], "max_tokens": 1}'), 200],
    ];
    for (const [name, body, status] of bodies) {
      const before = await replicaRequests();
      const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      assert.equal(r.status, status, `${name}: ${r.body.toString()}`);
      assert.ok(r.headers['x-replica-name'], `${name}: answered by the replica itself`);
      assert.match(String(r.headers['x-session-id']), /^[0-9a-f]{32}$/, `${name}: no usable body id, so a minted one`);
      assert.equal(await replicaRequests(), before + 1, `${name}: forwarded once`);
      const sim = sims.find((s) => s.name === r.headers['x-replica-name'])!;
      assert.equal((await sim.stats()).last_request?.body_sha256, createHash('sha256').update(body).digest('hex'), `${name}: the exact bytes`);
    }
    const health = JSON.parse((await simRequest(`${router.url}/health`)).body.toString()) as { replicas_ready: number };
    assert.equal(health.replicas_ready, 2, 'replica 4xx answers demote nothing (fall=1)');
  });

  it('answers a declared 100 MB body with 413 at once, without waiting for a byte of it, and closes', async () => {
    const before = await replicaRequests();
    const r = await raw(router.url, (write) => {
      write('POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n');
      return Promise.resolve();
    });
    assert.equal(r.status, 413, r.text);
    assert.ok(r.ms < 5_000, `413 after ${Math.round(r.ms)} ms`);
    assert.match(r.text, /"code":"body_too_large"/);
    assert.match(r.text, /\r\nconnection: close\r\n/i);
    assert.equal(r.closed, true, 'the connection is closed after the 413');
    assert.equal(await replicaRequests(), before);
  });

  it('answers a chunked body with 413 the moment it crosses --max-body', async () => {
    const before = await replicaRequests();
    const chunk = 'x'.repeat(16 * 1024);
    const r = await raw(router.url, async (write, stopped) => {
      write('POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
      for (let i = 0; i < 64 && !stopped(); i++) {
        write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
        await sleep(30);
      }
    });
    assert.equal(r.status, 413, r.text.slice(0, 300));
    assert.ok(r.sent < 2 * MAX_BODY, `answered after ${r.sent} bytes were sent (cap ${MAX_BODY})`);
    assert.equal(await replicaRequests(), before);
  });

  it('closes slowloris connections (headers byte by byte, and a dribbled body) after their timeouts while other clients are served', async () => {
    const dribbleHeaders = (): Promise<Raw> =>
      raw(
        router.url,
        async (write, stopped) => {
          const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nX-Pad: ${'a'.repeat(500)}`;
          for (let i = 0; i < head.length && !stopped(); i++) {
            write(head[i]);
            await sleep(20);
          }
        },
        8_000,
      );
    const dribbleBody = (): Promise<Raw> =>
      raw(
        router.url,
        async (write, stopped) => {
          write('POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n');
          for (let i = 0; i < 1000 && !stopped(); i++) {
            write('a');
            await sleep(20);
          }
        },
        8_000,
      );
    const slow = [...Array.from({ length: 20 }, dribbleHeaders), ...Array.from({ length: 20 }, dribbleBody)];
    const answeredAt: number[] = [];
    const t0 = performance.now();
    while (performance.now() - t0 < 3_500) {
      const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', body: Buffer.from('{"messages":[],"max_tokens":1}') });
      assert.equal(r.status, 200);
      answeredAt.push(performance.now());
    }
    const results = await Promise.all(slow);
    for (const [i, r] of results.entries()) {
      const kind = i < 20 ? 'headers' : 'body';
      assert.equal(r.closed, true, `${kind} slowloris still open after 8 s`);
      const limit = kind === 'headers' ? 1_000 : 2_000;
      // Node checks the deadlines once a second
      assert.ok(r.ms >= limit - 100 && r.ms < limit + 2_500, `${kind} slowloris cut after ${Math.round(r.ms)} ms`);
      assert.ok(r.status === 0 || r.status === 408, `${kind}: ${r.text.slice(0, 100)}`);
    }
    // served all along, never stuck behind the slow clients: judged by order, not by a latency
    // bound a loaded runner can overshoot. Normal requests were answered while all 40 slow clients
    // still held their connections (the first is cut at --header-timeout, 1 s).
    assert.ok(answeredAt.length >= 10, `only ${answeredAt.length} normal requests in 3.5 s`);
    const firstCut = Math.min(...results.map((r) => r.endedAt));
    const meanwhile = answeredAt.filter((at) => at < firstCut).length;
    assert.ok(meanwhile >= 3, `only ${meanwhile} normal requests answered before the first slow client was cut`);
    const acc = await accounting(router.url);
    assert.equal(acc.received, acc.terminated, 'every request that reached the data plane ended once');
    assert.equal(acc.inflight, 0);
  });

  it('answers 10,000 headers or a 1 MB header with 431, and keeps serving', async () => {
    let many = '';
    for (let i = 0; i < 10_000; i++) many += `X-H${i}: v\r\n`;
    for (const [name, block] of [
      ['10,000 headers', many],
      ['1 MB header', `X-Big: ${'a'.repeat(1024 * 1024)}\r\n`],
    ] as const) {
      const r = await raw(router.url, (write) => {
        write(`GET /v1/models HTTP/1.1\r\nHost: r\r\n${block}\r\n`);
        return Promise.resolve();
      });
      assert.ok(r.status === 431 || r.status === 400, `${name}: ${r.text.slice(0, 120)}`);
      assert.ok(r.ms < 2_000);
    }
    assert.equal((await simRequest(`${router.url}/v1/models`)).status, 200);
  });
});
