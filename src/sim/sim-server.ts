/**
 * The replica simulator's HTTP(S) server: routing, body reading, the `/__sim/*` control surface,
 * `/health`, `/metrics`, and the listening state behind the `refuse` fault.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { KvCacheModel } from './kv-cache.js';
import { SimExchange, type SimRuntime } from './sim-exchange.js';
import { applyFaultsPatch, SimFaultsError, type SimFaults, type SimFaultsPatch } from './sim-faults.js';
import { errorBody, modelsAnswer } from './sim-openai.js';
import type { SimOptions } from './sim-options.js';
import { AdmissionQueue } from './sim-scheduler.js';
import { SimStatsRecorder, type SimStats } from './sim-stats.js';

/** A running simulator. */
export interface SimServer {
  /** The port it listens on (stays the same across `refuse` periods). */
  readonly port: number;
  /** Identity reported in `X-Replica-Name` and stats. */
  readonly name: string;
  readonly scheme: 'http' | 'https';
  /** Stops listening, drops every connection and timer. */
  close(): Promise<void>;
  stats(): SimStats;
  faults(): SimFaults;
  /** Merges a faults patch (`reset: true` clears first); throws `SimFaultsError` when invalid. */
  setFaults(f: SimFaultsPatch): void;
  /** SIGUSR2: refuse connections if listening, listen again if refusing. */
  toggleRefuse(): void;
}

/** Hooks for embedding; the defaults are what the real process does. */
export interface SimServerHooks {
  /** `die_after_chunks`: default `process.exit(1)`. */
  die?: () => void;
}

const KEEP_ALIVE_MS = 65_000;

/**
 * Starts a simulator: waits `startupDelayMs` (nothing listens meanwhile), then listens unless
 * the `refuse` fault is set at start. Rejects if the port cannot be bound or TLS files cannot
 * be read.
 */
export async function startSimServer(opts: SimOptions, hooks: SimServerHooks = {}): Promise<SimServer> {
  const tls = opts.tlsCert !== null && opts.tlsKey !== null ? { cert: readFileSync(opts.tlsCert), key: readFileSync(opts.tlsKey) } : null;
  if (opts.startupDelayMs > 0) await sleep(opts.startupDelayMs);
  const sim = new Simulator(opts, tls, hooks);
  await sim.start();
  return sim;
}

class Simulator implements SimServer {
  readonly scheme: 'http' | 'https';
  private readonly server: Server;
  private readonly rt: SimRuntime;
  private readonly stats_ = new SimStatsRecorder();
  private currentFaults: SimFaults;
  private boundPort: number;
  private listening = false;
  private closing = false;
  private relistenTimer: NodeJS.Timeout | null = null;
  /** While refusing nothing else may hold the event loop: this keeps the process alive. */
  private keepAlive: NodeJS.Timeout | null = null;

  constructor(
    private readonly opts: SimOptions,
    tls: { cert: Buffer; key: Buffer } | null,
    hooks: SimServerHooks,
  ) {
    this.scheme = tls === null ? 'http' : 'https';
    this.currentFaults = { ...opts.faults };
    this.boundPort = opts.port;
    const handler = (req: IncomingMessage, res: ServerResponse): void => this.handle(req, res);
    const serverOpts = { keepAliveTimeout: KEEP_ALIVE_MS, noDelay: true };
    this.server = tls === null ? createHttpServer(serverOpts, handler) : createHttpsServer({ ...serverOpts, ...tls }, handler);
    this.server.keepAliveTimeout = KEEP_ALIVE_MS;
    this.server.headersTimeout = KEEP_ALIVE_MS + 1_000;
    this.rt = {
      servedModel: opts.servedModelName ?? opts.model,
      loras: opts.lora,
      startedAt: Math.floor(Date.now() / 1000),
      timing: { ttftBaseMs: opts.ttftBaseMs, prefillMsPerToken: opts.prefillMsPerToken, itlMs: opts.itlMs, itlJitterMs: opts.itlJitterMs },
      outputTokens: opts.outputTokens,
      stats: this.stats_,
      cache: new KvCacheModel(opts.blockSize, opts.kvBlocks),
      admission: new AdmissionQueue(opts.maxRunning),
      active: new Set<SimExchange>(),
      faults: () => this.currentFaults,
      die: hooks.die ?? (() => process.exit(1)),
    };
  }

  get port(): number {
    return this.boundPort;
  }

  get name(): string {
    return this.opts.name ?? `sim-${this.boundPort}`;
  }

  async start(): Promise<void> {
    if (!this.currentFaults.refuse) {
      await this.listen();
      return;
    }
    this.holdProcess(true);
    this.scheduleRelisten();
  }

  stats(): SimStats {
    const identity = { name: this.name, pid: process.pid, port: this.boundPort, model: this.rt.servedModel, devices: this.opts.devices };
    return this.stats_.snapshot(identity, this.rt.admission.running, this.rt.admission.waiting, this.currentFaults);
  }

  faults(): SimFaults {
    return { ...this.currentFaults };
  }

  setFaults(f: SimFaultsPatch): void {
    this.applyFaults(applyFaultsPatch(this.currentFaults, f));
  }

  toggleRefuse(): void {
    this.applyFaults({ ...this.currentFaults, refuse: !this.currentFaults.refuse, refuse_ms: null });
  }

  async close(): Promise<void> {
    this.closing = true;
    this.holdProcess(false);
    if (this.relistenTimer !== null) clearTimeout(this.relistenTimer);
    for (const exchange of this.rt.active) exchange.cancel();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    this.listening = false;
    await closed;
  }

  /** Takes the new faults; starts or stops listening when `refuse` changed. */
  private applyFaults(next: SimFaults): void {
    const wasRefusing = this.currentFaults.refuse;
    this.currentFaults = next;
    if (next.refuse && !wasRefusing) {
      this.holdProcess(true);
      this.stopListening();
      this.scheduleRelisten();
    } else if (!next.refuse && wasRefusing) {
      if (this.relistenTimer !== null) clearTimeout(this.relistenTimer);
      this.relistenTimer = null;
      this.listenUntilBound().catch((err: unknown) =>
        process.stderr.write(`sim ${this.name}: stopped trying to listen again: ${err instanceof Error ? err.message : 'unknown error'}\n`),
      );
    }
  }

  private scheduleRelisten(): void {
    const ms = this.currentFaults.refuse_ms;
    if (ms === null) return;
    this.relistenTimer = setTimeout(() => {
      this.relistenTimer = null;
      this.applyFaults({ ...this.currentFaults, refuse: false, refuse_ms: null });
    }, ms);
  }

  /** While refusing, connections left idle by finished responses are closed too. */
  private readonly afterResponse = (): void => {
    if (!this.listening && !this.closing) setImmediate(() => this.server.closeIdleConnections());
  };

  private holdProcess(hold: boolean): void {
    if (hold && this.keepAlive === null) this.keepAlive = setInterval(() => undefined, 1 << 30);
    if (!hold && this.keepAlive !== null) {
      clearInterval(this.keepAlive);
      this.keepAlive = null;
    }
  }

  private stopListening(): void {
    if (!this.listening) return;
    this.listening = false;
    this.server.close(); // also closes idle keep-alive connections
  }

  private listen(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.server.once('error', onError);
      this.server.listen({ port: this.boundPort, host: this.opts.host }, () => {
        this.server.off('error', onError);
        this.boundPort = (this.server.address() as AddressInfo).port;
        this.listening = true;
        this.holdProcess(false);
        resolve();
      });
    });
  }

  /** Re-listens on the same port after a refuse period, retrying while it is taken. */
  private async listenUntilBound(): Promise<void> {
    while (!this.closing && !this.listening && !this.currentFaults.refuse) {
      try {
        await this.listen();
      } catch (err: unknown) {
        const reason = err instanceof Error ? err.message : String(err);
        process.stderr.write(`sim ${this.name}: cannot listen again on port ${this.boundPort}: ${reason}; retrying\n`);
        await sleep(200);
      }
    }
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    res.setHeader('x-replica-name', this.name);
    res.on('close', this.afterResponse);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const query = q < 0 ? '' : url.slice(q + 1);
    // The router's model discovery (marked like this), as its health probes, is not client traffic.
    if (path === '/v1/models' && req.headers['x-router-probe'] === 'models')
      sendJson(res, 200, modelsAnswer(this.currentFaults.models_list, this.rt.servedModel, this.rt.startedAt, this.rt.loras));
    else if (path.startsWith('/v1/')) this.handleV1(req, res, path, query);
    else if (path.startsWith('/__sim/')) this.handleControl(req, res, path);
    else if (path === '/health' && (req.method === 'GET' || req.method === 'HEAD')) {
      const ok = this.currentFaults.health === 'ok';
      sendJson(res, ok ? 200 : 503, ok ? '{"status":"ok"}' : '{"status":"not_ready"}');
    } else if (path === '/metrics' && req.method === 'GET') {
      if (this.currentFaults.metrics_hang) return void req.resume(); // never answered; the client's departure ends it
      const text = this.stats_.metricsText(this.name, this.rt.admission.running, this.rt.admission.waiting + this.currentFaults.external_waiting);
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(text);
    } else {
      req.resume();
      sendJson(res, 404, errorBody(404, `no route for ${req.method ?? 'GET'} ${path}`));
    }
  }

  private handleV1(req: IncomingMessage, res: ServerResponse, path: string, query: string): void {
    const exchange = new SimExchange(this.rt, req, res, path);
    const keep = path === '/v1/chat/completions' || path === '/v1/completions';
    const hash = createHash('sha256');
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
      if (keep) chunks.push(chunk);
    });
    req.on('end', () => {
      const bodySha256 = hash.digest('hex');
      const method = req.method ?? 'GET';
      this.stats_.onBody({ method, path, query, rawHeaders: req.rawHeaders, bodyBytes: bytes, bodySha256 });
      exchange.dispatch(path, query, bytes, keep ? Buffer.concat(chunks, bytes) : null);
    });
  }

  private handleControl(req: IncomingMessage, res: ServerResponse, path: string): void {
    if (path === '/__sim/stats' && req.method === 'GET') {
      req.resume();
      sendJson(res, 200, JSON.stringify(this.stats()));
    } else if (path === '/__sim/faults' && req.method === 'GET') {
      req.resume();
      sendJson(res, 200, JSON.stringify(this.currentFaults));
    } else if (path === '/__sim/faults' && req.method === 'POST') {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => this.postFaults(res, Buffer.concat(chunks).toString('utf8')));
    } else {
      req.resume();
      sendJson(res, 404, errorBody(404, `no simulator control route ${req.method ?? 'GET'} ${path}`));
    }
  }

  private postFaults(res: ServerResponse, text: string): void {
    let next: SimFaults;
    try {
      next = applyFaultsPatch(this.currentFaults, text.trim() === '' ? {} : JSON.parse(text));
    } catch (err: unknown) {
      if (!(err instanceof SimFaultsError) && !(err instanceof SyntaxError)) throw err;
      sendJson(res, 400, errorBody(400, `invalid faults: ${err.message}`));
      return;
    }
    if (next.refuse && !this.currentFaults.refuse) {
      // Answer first on a connection that then closes, then stop listening.
      res.setHeader('connection', 'close');
      res.on('finish', () => this.applyFaults(next));
      sendJson(res, 200, JSON.stringify(next));
      return;
    }
    this.applyFaults(next);
    sendJson(res, 200, JSON.stringify(next));
  }
}

function sendJson(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
}
