/** The data plane's pool closes idle connections before an engine's keep-alive timeout would. */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { createEndpoint, destroyEndpoint } from './replica-endpoint.js';
import type { AttemptEvents } from './upstream-pool.js';

const connections = (server: http.Server): Promise<number> => new Promise((resolve, reject) => server.getConnections((e, n) => (e ? reject(e) : resolve(n))));

describe('createEndpoint', () => {
  it('keeps a connection for reuse, then closes it once idle for 3.5-4 s (before uvicorn closes at 5 s)', async () => {
    // The server's own keep-alive is longer than the test: only the router's pool can close it.
    const server = http.createServer((_req, res) => res.end('ok'));
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const ep = createEndpoint({ scheme: 'http', host: '127.0.0.1', port: (server.address() as AddressInfo).port });
    try {
      await new Promise<void>((resolve, reject) => {
        const events: AttemptEvents<undefined> = {
          sent: () => undefined,
          response: () => undefined,
          data: () => true,
          complete: () => resolve(),
          error: (_a, err) => reject(err),
        };
        ep.pool.send(undefined, { method: 'GET', path: '/', headers: ['host', ep.hostHeader] }, events);
      });
      const freedAt = performance.now();
      assert.equal(await connections(server), 1, 'kept for reuse');
      for (;;) {
        if ((await connections(server)) === 0) break;
        assert.ok(performance.now() - freedAt < 10_000, 'the idle connection was never closed');
        await new Promise((r) => setTimeout(r, 50));
      }
      const idleMs = performance.now() - freedAt;
      assert.ok(idleMs >= 3_000, `closed too early, after ${Math.round(idleMs)} ms idle`);
    } finally {
      destroyEndpoint(ep);
      server.close();
    }
  });
});
