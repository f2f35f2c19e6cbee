import http from 'node:http';
import type { Socket } from 'node:net';
import { RouterConfig } from './config/router-config.js';
import { createAppLogger } from './common/logging/logger.js';
import { clientServerOptions } from './common/http/client-server.js';
import { clientErrorHandler, refuseConnect, refuseWithoutHost } from './common/errors/edge-errors.js';
import { isModelList } from './modules/proxy/request-reader.js';
import { WorkerPlane } from './modules/proxy/worker-plane.js';
import { installTracing, processTracing, ROUTER_VERSION, startTracing } from './common/tracing/tracing.js';
import { Batcher, type FromWorker, type ToWorker } from './modules/proxy/worker-protocol.js';
import { fromWorkerWire, toWorkerMessage, type ToWorkerWire } from './modules/proxy/worker-wire.js';

/**
 * A worker process (`--workers N`, docs/workers.md), forked by the primary: it
 * serves the client connections the primary hands it, `/v1/` through its WorkerPlane and the
 * rest by forwarding to the primary. Signals are the primary's to act on: a Ctrl-C reaches the
 * whole process group, and the primary drains the workers itself. When the primary is gone, the
 * worker finishes what it holds and exits.
 */
function main(): void {
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => undefined);
  const out = new Batcher<FromWorker>((batch) => {
    if (process.connected) process.send!(batch.map(fromWorkerWire));
  });
  const send = (m: FromWorker): void => out.push(m);
  let plane: WorkerPlane | undefined;
  let live: RouterConfig | undefined;
  let server: http.Server | undefined;
  let leaving = false;
  const leave = (): void => {
    if (leaving) return;
    leaving = true;
    server?.close();
    server?.closeIdleConnections();
    // Kept alive by this check while requests finish; the primary kills it past its drain deadline.
    const check = setInterval(() => {
      if ((plane?.busy ?? 0) !== 0) return;
      clearInterval(check);
      // The spans still batched leave first (a no-op with tracing off).
      const exit = (): never => process.exit(0);
      (processTracing()?.shutdown() ?? Promise.resolve()).then(exit, exit);
    }, 50);
  };
  const boot = (m: Extract<ToWorker, { t: 'config' }>): void => {
    const total = m.config.bodyMemoryBytes;
    const share = Math.max(Math.floor(total / Math.max(1, m.config.workers)), m.config.maxBodyBytes);
    const config = (live = new RouterConfig({ ...m.config, bodyMemoryBytes: Math.min(total, share) }));
    const log = createAppLogger(config.logLevel, config.logFormat).child({ worker: m.index });
    process.on('uncaughtException', (err) => {
      log.fatal({ event: 'internal_error', source: 'uncaught_exception', err }, 'worker process failed; the primary replaces it');
      process.exit(1);
    });
    const p = (plane = new WorkerPlane(config, log, m.primaryPort, send));
    server = refuseConnect(
      http.createServer(clientServerOptions(config), (req, res) => {
        if (refuseWithoutHost(req, res)) return;
        if (req.url !== undefined && req.url.startsWith('/v1/') && !isModelList(req.method, req.url)) p.serve(req, res);
        else p.forward(req, res);
      }),
    );
    server.on(
      'clientError',
      clientErrorHandler(() => log),
    );
    // Listening (on a private loopback port nobody is told) starts Node's per-connection header
    // and request timeouts; the clients' connections arrive from the primary.
    server.listen({ host: '127.0.0.1', port: 0 }, () => send({ t: 'ready' }));
  };
  const receive = (m: ToWorker, handle?: Socket): void => {
    if (m.t === 'config') {
      // Its own tracer provider (the worker relays, so its spans are the request's), before the plane reads it.
      startTracing(process.env, 'worker', ROUTER_VERSION).then(
        (tracing) => {
          installTracing(tracing);
          boot(m);
        },
        (err: unknown) => {
          process.stderr.write(`worker ${m.index}: tracing could not start: ${err instanceof Error ? err.message : String(err)}\n`);
          boot(m);
        },
      );
      return;
    }
    if (m.t === 'conn') {
      if (handle === undefined || server === undefined) return void handle?.destroy();
      server.emit('connection', handle);
      handle.emit('data', Buffer.from(m.head.buffer, m.head.byteOffset, m.head.byteLength));
      handle.resume();
      return;
    }
    if (m.t === 'exit') return leave();
    if (m.t === 'reconfig') return live?.update(m.fields);
    plane?.receive(m);
  };
  // Messages come one by one (a connection, with its handle) or in batches (everything else).
  process.on('message', (m: ToWorker | ToWorkerWire[], handle?: Socket) => {
    if (!Array.isArray(m)) return receive(m, handle);
    for (const x of m) receive(toWorkerMessage(x));
  });
  process.on('disconnect', () => {
    plane?.receive({ t: 'stopping' });
    leave();
  });
}

main();
