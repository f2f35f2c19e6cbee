import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { fork, type ChildProcess } from 'node:child_process';
import type http from 'node:http';
import net from 'node:net';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue, type Registry } from 'prom-client';
import { RouterConfig, type RouterConfigFields } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { LISTEN_BACKLOG } from '../../common/http/client-server.js';
import { ShutdownService } from '../lifecycle/shutdown.service.js';
import { formatUrl } from '../registry/replica-endpoint.js';
import { RemoteExchanges, type WorkerLink } from '../proxy/remote-exchanges.service.js';
import { Batcher, type FromWorker, type ToWorker } from '../proxy/worker-protocol.js';
import { fromWorkerMessage, toWorkerWire, type FromWorkerWire } from '../proxy/worker-wire.js';

type Snapshot = MetricObjectWithValues<MetricValue<string>>[];

/** A worker must answer a scrape within this; past it the scrape goes on without its part. */
const METRICS_WAIT_MS = 2_000;
/** A worker that exits sooner than this after its start is restarted only after this pause (a crash loop must not spin). */
const RESTART_PAUSE_MS = 1_000;
/** The first bytes of a connection the primary reads to choose who serves it. */
const MAX_HEAD_BYTES = 4_096;

interface Worker extends WorkerLink {
  readonly child: ChildProcess;
  readonly out: Batcher<ToWorker>;
  readonly startedAt: number;
  ready: boolean;
  /** Its metrics at its last scrape (kept once it exits, so counters never go back). */
  lastMetrics: Snapshot;
}

/** The stream handle of a socket, to stop reading before it is passed to a worker. */
type WithHandle = net.Socket & { _handle?: { readStop(): number } | null };

/**
 * The worker processes of `--workers N` (docs/workers.md). The primary owns the
 * fleet, health, the admin API, `/metrics` and the probes, and holds every routing table; the
 * workers relay `/v1/` traffic. The primary listens on the router's port itself and reads the
 * first bytes of each new connection: one whose first request is for `/v1/` is handed to a worker
 * (round robin over the ready ones), any other (a probe, a scrape, the admin API) stays with the
 * primary, whose event loop relays no tokens, so `/health` answers while the workers are
 * saturated. A worker that exits is replaced; its requests end as router failures.
 */
@Injectable()
export class WorkerPool implements OnApplicationShutdown {
  private readonly workers: Worker[] = [];
  private server: net.Server | undefined;
  private appServer: http.Server | undefined;
  private primaryPort = 0;
  private next = 0;
  private stopping = false;
  private scrapes = 0;
  private readonly pendingScrapes = new Map<number, (s: Snapshot) => void>();
  /** Metrics of workers that exited, at their last scrape. */
  private retired: Snapshot[] = [];

  constructor(
    private readonly config: RouterConfig,
    private readonly remote: RemoteExchanges,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
    shutdown: ShutdownService,
  ) {
    // First of the shutdown steps: workers answer new requests 503 from now on, as the primary does.
    if (this.enabled) shutdown.register('workers', () => Promise.resolve(this.stopAccepting()));
  }

  get enabled(): boolean {
    return this.config.workers > 1;
  }

  /** Workers ready to take connections. */
  get readyCount(): number {
    return this.workers.filter((w) => w.ready).length;
  }

  /** Fork the workers, wait for them, then listen on the router's port; returns its URL. */
  async start(appServer: http.Server, primaryPort: number): Promise<string> {
    this.appServer = appServer;
    this.primaryPort = primaryPort;
    await Promise.all(Array.from({ length: this.config.workers }, (_, i) => this.spawn(i)));
    const server = (this.server = net.createServer({ noDelay: true }, (socket) => this.take(socket)));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.config.listenHost, port: this.config.listenPort, backlog: LISTEN_BACKLOG }, () => resolve());
    });
    const address = server.address() as net.AddressInfo;
    return formatUrl('http', address.address, address.port);
  }

  /** A config reload: every worker takes the settings that change live (a worker forked later gets the whole config). */
  reconfigure(fields: Partial<RouterConfigFields>): void {
    for (const w of this.workers) w.send({ t: 'reconfig', fields });
  }

  /** Shutdown began: workers refuse new requests (503 `shutting_down`), as the primary does. */
  stopAccepting(): void {
    this.stopping = true;
    for (const w of this.workers) w.send({ t: 'stopping' });
  }

  /**
   * The metrics of every worker, with those of workers that exited, each counter summed with the
   * primary's (`own`) under its one name: one series per label set for the whole router.
   */
  async aggregate(own: Snapshot): Promise<Registry> {
    if (this.retired.length > 8) this.retired = [await AggregatorRegistry.aggregate(this.retired).getMetricsAsJSON()];
    const parts = await Promise.all(this.workers.map((w) => this.scrape(w)));
    return AggregatorRegistry.aggregate([own, ...this.retired, ...parts]);
  }

  /** After the fleet drained (Nest's shutdown hooks): every worker exits, none is left behind. */
  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.server?.close();
    await Promise.all(
      this.workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w.child.exitCode !== null || w.child.signalCode !== null) return resolve();
            const kill = setTimeout(() => w.child.kill('SIGKILL'), Math.max(1_000, this.config.drainTimeoutMs));
            w.child.once('exit', () => {
              clearTimeout(kill);
              resolve();
            });
            w.send({ t: 'exit' });
          }),
      ),
    );
  }

  private spawn(index: number): Promise<void> {
    const child = fork(new URL('../../worker.js', import.meta.url), [], { serialization: 'advanced', stdio: 'inherit' });
    const out = new Batcher<ToWorker>((batch) => {
      if (child.connected) child.send(batch.map(toWorkerWire));
    });
    const w: Worker = { index, child, out, startedAt: performance.now(), ready: false, lastMetrics: [], send: (m: ToWorker) => out.push(m) };
    this.workers[index] = w;
    return new Promise<void>((resolve) => {
      const receive = (m: FromWorker): void => {
        if (m.t === 'ready') {
          w.ready = true;
          if (this.stopping) w.send({ t: 'stopping' });
          return resolve();
        }
        if (m.t === 'metrics') return this.pendingScrapes.get(m.id)?.(m.metrics);
        this.remote.receive(w, m);
      };
      child.on('message', (batch: FromWorkerWire[]) => {
        for (const m of batch) receive(fromWorkerMessage(m));
      });
      child.once('exit', (code, signal) => {
        resolve();
        this.exited(w, code, signal);
      });
      child.send({ t: 'config', config: { ...this.config, warnings: [] }, primaryPort: this.primaryPort, index } satisfies ToWorker);
    });
  }

  private exited(w: Worker, code: number | null, signal: NodeJS.Signals | null): void {
    w.ready = false;
    if (w.lastMetrics.length > 0) this.retired.push(w.lastMetrics);
    const why = `worker process ${w.index} (pid ${w.child.pid}) exited (${signal ?? `code ${code}`})`;
    this.remote.workerGone(w, why);
    if (this.stopping) return;
    this.log.error({ event: 'worker_exited', worker: w.index, pid: w.child.pid, code, signal }, `${why}; starting a new one`);
    const pause = performance.now() - w.startedAt < RESTART_PAUSE_MS ? RESTART_PAUSE_MS : 0;
    setTimeout(() => {
      this.spawn(w.index).catch((err: unknown) => this.log.error({ err, worker: w.index }, 'could not start a worker process'));
    }, pause).unref();
  }

  /** A new client connection: read until its first request line names a path, then hand it on. */
  private take(socket: net.Socket): void {
    let head: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), this.config.headerTimeoutMs);
    const ignore = (): void => undefined;
    socket.on('error', ignore);
    socket.once('close', () => clearTimeout(timer));
    const onData = (chunk: Buffer): void => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const target = requestTarget(head);
      if (target === undefined && head.length < MAX_HEAD_BYTES) return;
      socket.off('data', onData);
      socket.off('error', ignore);
      clearTimeout(timer);
      socket.pause();
      const w = target === '/v1/' ? this.pick() : undefined;
      if (w === undefined) return this.serveHere(socket, head);
      (socket as WithHandle)._handle?.readStop();
      // What the worker was told before stays ahead of the connection.
      w.out.flush();
      w.child.send({ t: 'conn', head } satisfies ToWorker, socket, { keepOpen: false }, (err) => {
        if (err !== null) socket.destroy();
      });
    };
    socket.on('data', onData);
  }

  private serveHere(socket: net.Socket, head: Buffer): void {
    this.appServer!.emit('connection', socket);
    socket.emit('data', head);
    socket.resume();
  }

  private pick(): Worker | undefined {
    const n = this.workers.length;
    for (let i = 0; i < n; i++) {
      const w = this.workers[(this.next + i) % n];
      if (w?.ready === true && w.child.connected) {
        this.next = (this.next + i + 1) % n;
        return w;
      }
    }
    return undefined;
  }

  private scrape(w: Worker): Promise<Snapshot> {
    if (!w.ready) return Promise.resolve(w.lastMetrics);
    const id = ++this.scrapes;
    return new Promise<Snapshot>((resolve) => {
      const done = (s: Snapshot): void => {
        clearTimeout(timer);
        this.pendingScrapes.delete(id);
        w.lastMetrics = s;
        resolve(s);
      };
      const timer = setTimeout(() => done(w.lastMetrics), METRICS_WAIT_MS);
      this.pendingScrapes.set(id, done);
      w.send({ t: 'metrics?', id });
    });
  }
}

/**
 * The first four bytes of the request target of `head` (a request line `METHOD SP target ...`),
 * or undefined while too little has arrived to tell.
 */
function requestTarget(head: Buffer): string | undefined {
  const sp = head.indexOf(0x20);
  if (sp < 0 || head.length < sp + 5) return undefined;
  return head.toString('latin1', sp + 1, sp + 5);
}
