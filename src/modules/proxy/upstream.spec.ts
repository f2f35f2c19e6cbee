import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, it } from 'node:test';
import { PassThrough, Writable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Exchange } from './exchange.js';
import { flatHeaders, relayChunk, relayEnd } from './upstream.js';

/**
 * The client side of an exchange, standing in for its ServerResponse: records what it is given
 * and, while `holding`, leaves each write unacknowledged (a client that does not read).
 */
class FakeClient extends Writable {
  readonly chunks: string[] = [];
  holding = false;
  private pending: Array<() => void> = [];

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.chunks.push(chunk.toString());
    if (this.holding) this.pending.push(done);
    else done();
  }

  /** The client reads again: every held write is acknowledged. */
  release(): void {
    this.holding = false;
    for (const done of this.pending.splice(0)) done();
  }
}

/** relayChunk() and relayEnd() between a replica's response (a PassThrough the test writes) and a FakeClient. */
function relay(o: { stream: boolean; clientBuffer?: number }) {
  const client = new FakeClient({ highWaterMark: o.clientBuffer ?? 16 * 1024 });
  const ex = new Exchange({ headers: {} } as IncomingMessage, client as unknown as ServerResponse);
  ex.stream = o.stream;
  let refreshes = 0;
  // The stream idle timer (--stream-idle-timeout): only its refresh() matters here.
  ex.timer = { refresh: () => (refreshes++, ex.timer) } as unknown as NodeJS.Timeout;
  const replica = new PassThrough();
  const gaps: number[] = [];
  // As the relay drives them: each chunk in turn, the replica paused while the client is full.
  const gap = (s: number): number => gaps.push(s);
  replica.on('data', (c: Buffer) => {
    if (!relayChunk(ex, c, gap, replica)) replica.pause();
  });
  replica.on('end', () => relayEnd(ex));
  /** The replica sends `chunk`; resolves once the relay had its turn. */
  const send = async (chunk: string): Promise<void> => {
    replica.write(chunk);
    await nextTurn();
  };
  return { client, ex, replica, gaps, send, refreshes: () => refreshes };
}

describe('relayChunk and relayEnd (the data plane relay)', { timeout: 5_000 }, () => {
  it('hands each chunk to the client as it arrives, before the next exists, and ends the client with the replica', async () => {
    const r = relay({ stream: true });
    await r.send('data: a\n\n');
    assert.deepEqual(r.client.chunks, ['data: a\n\n'], 'the first chunk is not held for more');
    await r.send('data: b\n\n');
    assert.deepEqual(r.client.chunks, ['data: a\n\n', 'data: b\n\n']);
    assert.equal(r.client.writableEnded, false);
    r.replica.end();
    await once(r.client, 'finish');
    assert.deepEqual([r.ex.bytesOut, r.ex.tail], [18, 0x0a0a]);
  });

  it("refreshes a stream's idle timer on every chunk and reports one gap per chunk after the first", async () => {
    const r = relay({ stream: true });
    for (const c of ['data: 1\n\n', 'data: 2\n\n', 'data: 3\n\n']) await r.send(c);
    assert.equal(r.refreshes(), 3);
    assert.equal(r.gaps.length, 2);
    assert.ok(r.ex.at.firstChunk > 0 && r.ex.at.lastChunk >= r.ex.at.firstChunk);
    const plain = relay({ stream: false });
    await plain.send('{"a":1}');
    assert.deepEqual([plain.refreshes(), plain.gaps.length, plain.ex.at.firstChunk], [0, 0, 0], 'a plain answer has no idle timer or chunk gaps');
    assert.ok(plain.ex.at.clientFirstByte > 0);
  });

  it('pauses the replica while the client does not read, and resumes it once the client drains', async () => {
    const r = relay({ stream: true, clientBuffer: 1 });
    r.client.holding = true;
    await r.send('data: 1\n\n');
    assert.equal(r.replica.isPaused(), true, "the client's back-pressure reaches the replica");
    await r.send('data: 2\n\n');
    assert.deepEqual(r.client.chunks, ['data: 1\n\n'], 'nothing more is read from the replica meanwhile');
    r.client.release();
    await nextTurn();
    assert.equal(r.replica.isPaused(), false);
    assert.deepEqual(r.client.chunks, ['data: 1\n\n', 'data: 2\n\n']);
  });

  it('drops what the replica sends after the client went away', async () => {
    const r = relay({ stream: true });
    r.client.destroy();
    await r.send('data: late\n\n');
    assert.deepEqual([r.client.chunks, r.ex.bytesOut, r.refreshes()], [[], 0, 0]);
  });
});

describe('flatHeaders (the upstream request headers as http.request takes them)', () => {
  it('lists each name with its value, one entry per element of a list, numbers as text, nothing for undefined', () => {
    assert.deepEqual(flatHeaders({ host: 'r:8000', 'content-length': 12, cookie: ['a=1', 'b=2'], 'x-absent': undefined }), [
      'host',
      'r:8000',
      'content-length',
      '12',
      'cookie',
      'a=1',
      'cookie',
      'b=2',
    ]);
  });
});
