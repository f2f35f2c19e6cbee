import assert from 'node:assert/strict';
import { once } from 'node:events';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createAppLogger } from '../../common/logging/logger.js';
import { createEndpoint, destroyEndpoint } from '../registry/replica-endpoint.js';
import { Replica } from '../registry/replica.js';
import { NO_ROUTE } from '../routing/routing.policy.js';
import { Exchange } from './exchange.js';
import { ExchangeRelay, type RetryAnswer } from './exchange-relay.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** The relay with nothing behind it: no health signals, and no retry target. */
class BareRelay extends ExchangeRelay {
  constructor() {
    super({ requestTimeoutMs: 10_000, streamIdleTimeoutMs: 10_000, connectTimeoutMs: 10_000 }, createAppLogger('silent', 'json'));
  }

  send(ex: Exchange, r: Replica): void {
    ex.res.once('close', () => this.closed(ex));
    this.start(ex, NO_ROUTE, r);
  }

  protected upstreamFailed(): void {}
  protected connectFailed(): void {}
  protected retryTarget(_ex: Exchange, _failed: Replica, _stale: boolean, _signal: boolean, _err: NodeJS.ErrnoException, answer: RetryAnswer): void {
    answer(undefined);
  }
  protected released(ex: Exchange): void {
    ex.vacate();
  }
  protected finished(ex: Exchange): void {
    this.released(ex);
  }
  protected chunkGap(): void {}
}

async function listen(server: http.Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

describe('ExchangeRelay: a settled exchange is not kept alive', () => {
  const body = Buffer.alloc(256 * 1024, 'x');
  const held: WeakRef<Exchange>[] = [];
  let upstream: http.Server;
  let front: http.Server;
  let replica: Replica;
  let frontPort: number;

  before(async () => {
    upstream = http.createServer((req, res) => {
      req.resume();
      req.once('end', () => res.end('{"ok":true}'));
    });
    const endpoint = createEndpoint({ scheme: 'http', host: '127.0.0.1', port: await listen(upstream) });
    replica = new Replica('a', 'static', endpoint, null, { ready: true });
    const relay = new BareRelay();
    front = http.createServer((req, res) => {
      req.resume();
      const ex = new Exchange(req, res);
      ex.body = body;
      ex.request = { sessionId: 's', publish: false };
      held.push(new WeakRef(ex));
      relay.send(ex, replica);
    });
    frontPort = await listen(front);
  });

  after(async () => {
    destroyEndpoint(replica.endpoint);
    front.close();
    upstream.close();
    await Promise.all([once(front, 'close'), once(upstream, 'close')]);
  });

  it('the kept-alive upstream socket of a first exchange holds none of it once it ended', async () => {
    // Each request on its own client connection, one at a time: the first dials the replica, the
    // others reuse that socket, which stays open in the endpoint's pool after the test's last answer.
    for (let i = 0; i < 3; i++) {
      const res = await new Promise<IncomingMessage>((resolve, reject) => {
        http.get({ port: frontPort, host: '127.0.0.1', agent: false }, resolve).once('error', reject);
      });
      res.resume();
      await once(res, 'end');
    }
    assert.equal(replica.endpoint.pool.open, 1, 'the upstream socket is pooled, alive');
    await nextTurn();
    gc();
    assert.deepEqual(
      held.map((w) => w.deref() !== undefined),
      [false, false, false],
      'every settled exchange (the one that opened the socket included) was collected',
    );
  });
});

describe('Exchange.release', () => {
  /** A client response that records whether anything was written or destroyed. */
  function recordingResponse(): { res: ServerResponse; touched: () => boolean } {
    let touched = false;
    const sink = new Writable({ write: (_c, _e, done) => ((touched = true), done()) });
    const res = Object.assign(sink, { headersSent: false, setHeader: () => (touched = true), statusCode: 200 });
    res.destroy = () => ((touched = true), res);
    return { res: res as unknown as ServerResponse, touched: () => touched };
  }

  it('keeps the id, status and cause, and a late failure or cut writes nothing', () => {
    const { res, touched } = recordingResponse();
    const ex = new Exchange({ headers: { 'x-request-id': 'req-1' } } as unknown as IncomingMessage, res);
    ex.body = Buffer.from('{}');
    ex.request = { sessionId: 's', publish: false };
    ex.status = 200;
    ex.end('ok');
    ex.release();
    assert.equal(ex.body, undefined);
    assert.equal(ex.request, undefined);
    assert.deepEqual(ex.req.headers, {});
    ex.fail('replica_unreachable', 'upstream_error', 'a retry answer that came too late');
    ex.cut('replica_disconnected', 'an upstream error after the end');
    assert.equal(touched(), false, 'the client response was not written or destroyed');
    assert.equal(ex.id, 'req-1');
    assert.equal(ex.cause, 'ok');
    assert.equal(ex.status, 200);
  });
});
