import { Client, type Dispatcher } from 'undici';

/**
 * Idle upstream connections are closed before common engine keep-alive timeouts (uvicorn: 5 s):
 * none lives past 3.5 s idle (undici's own timer, also shortened by an engine's `Keep-Alive:
 * timeout` hint).
 */
const IDLE_MS = 3_500;
/** Idle upstream connections kept per replica for reuse; busy ones are never capped (contract §3). */
const MAX_IDLE = 256;
/**
 * undici's own connect timeout, a backstop only: the relay arms the configured `--connect-timeout`
 * itself (a config reload changes it for the next request), and gives up on the attempt then.
 */
const CONNECT_BACKSTOP_MS = 120_000;

/** TLS options of an `https` replica's connections. */
export interface PoolTls {
  readonly ca?: Buffer | undefined;
  readonly rejectUnauthorized: boolean;
}

/**
 * One keep-alive connection to a replica: an undici `Client` with one request at a time. `served`
 * counts the responses its current socket completed, so an attempt knows whether it went out on
 * a reused socket (the replica may have closed it just as it was picked: retried once, contract
 * §3), as `ClientRequest.reusedSocket` told.
 */
export class UpstreamConnection {
  readonly client: Client;
  /** Responses completed on the current socket; 0 once it closed (the next dispatch dials again). */
  served = 0;
  connected = false;

  constructor(origin: string, tls: PoolTls | undefined) {
    this.client = new Client(origin, {
      pipelining: 1,
      keepAliveTimeout: IDLE_MS,
      keepAliveMaxTimeout: IDLE_MS,
      // The relay's timers decide (request timeout, stream idle timeout): none of undici's own.
      headersTimeout: 0,
      bodyTimeout: 0,
      connectTimeout: CONNECT_BACKSTOP_MS,
      connect: tls === undefined ? undefined : { ca: tls.ca, rejectUnauthorized: tls.rejectUnauthorized },
    });
    this.client.on('connect', () => (this.connected = true));
    this.client.on('disconnect', () => {
      this.connected = false;
      this.served = 0;
    });
  }
}

/** What the relay hears of an {@link UpstreamAttempt}; one object per relay, so an attempt allocates no closures. */
export interface AttemptEvents<X> {
  /** Every byte of the request was written. */
  sent(a: UpstreamAttempt<X>): void;
  /** The status line and headers (raw, as undici read them); `resume` restarts a paused body. */
  response(a: UpstreamAttempt<X>, status: number, headers: Buffer[], statusText: string): void;
  /** A body chunk; false pauses the replica's socket until {@link UpstreamAttempt.resume}. */
  data(a: UpstreamAttempt<X>, chunk: Buffer): boolean;
  /** The response was read to its end. */
  complete(a: UpstreamAttempt<X>): void;
  /** The attempt failed: before the connection (`connected` false), before the response or during its body. */
  error(a: UpstreamAttempt<X>, err: NodeJS.ErrnoException): void;
}

/**
 * One request of an exchange on one pooled connection: undici's dispatch handler (the callback
 * form, which undici calls without wrapping it), passing what happens on to the relay. Once
 * {@link abandon}ed (a timeout, the client left, a connect timeout) it reports nothing more, and a
 * request not yet written is never written.
 */
export class UpstreamAttempt<X> implements Dispatcher.DispatchHandler {
  /** The request went out on a socket that had already served a response. */
  readonly reused: boolean;
  /** The request is being written on a connected socket (undici's `onConnect`). */
  connected = false;
  /** The replica's status line arrived. */
  responded = false;
  /**
   * The caller's connect timer while the connection is {@link dialling}: cleared here once the
   * request is on a connected socket, or the attempt failed or was abandoned.
   */
  connectTimer: NodeJS.Timeout | undefined;
  private abortRequest: ((err?: Error) => void) | undefined;
  private resumeBody: (() => void) | undefined;
  private abandoned = false;

  constructor(
    readonly ex: X,
    private readonly conn: UpstreamConnection,
    private readonly pool: UpstreamPool,
    private readonly events: AttemptEvents<X>,
  ) {
    this.reused = conn.connected && conn.served > 0;
  }

  /** The connection is still being dialled: the relay arms its connect timeout. */
  get dialling(): boolean {
    return !this.conn.connected;
  }

  onConnect(abort: (err?: Error) => void): void {
    if (this.abandoned) return abort();
    this.abortRequest = abort;
    this.connected = true;
    clearTimeout(this.connectTimer);
  }

  onRequestSent(): void {
    if (!this.abandoned) this.events.sent(this);
  }

  onUpgrade(): void {
    // Never asked for: the data plane sends no `Upgrade` and refuses CONNECT.
  }

  onHeaders(status: number, headers: Buffer[], resume: () => void, statusText: string): boolean {
    if (this.abandoned) return false;
    // An informational answer (103 Early Hints) is not the response: Node's client kept it apart too.
    if (status < 200) return true;
    this.responded = true;
    this.resumeBody = resume;
    this.events.response(this, status, headers, statusText);
    return true;
  }

  onData(chunk: Buffer): boolean {
    return this.abandoned || this.events.data(this, chunk);
  }

  onComplete(): void {
    this.pool.give(this.conn, true);
    if (!this.abandoned) this.events.complete(this);
  }

  onError(err: Error): void {
    clearTimeout(this.connectTimer);
    this.pool.give(this.conn, false);
    if (!this.abandoned) this.events.error(this, err);
  }

  /** Restart a body paused by {@link AttemptEvents.data}. */
  resume(): void {
    this.resumeBody?.();
  }

  /**
   * Give the attempt up (nothing more is reported): the connection is closed, whether the request
   * went out on it or it is still being dialled (a replica that never answers a SYN holds no
   * socket past the relay's connect timeout).
   */
  abandon(): void {
    if (this.abandoned) return;
    this.abandoned = true;
    clearTimeout(this.connectTimer);
    if (this.abortRequest !== undefined) this.abortRequest();
    else void this.conn.client.destroy().catch(() => undefined);
  }
}

/**
 * The data plane's connections to one replica (client traffic and warm copies; probes have their
 * own agent): the most recently used idle
 * connection is taken first (so a burst's extra connections go idle and close), a new one is
 * opened when none is idle. Requests are never queued behind a cap.
 */
export class UpstreamPool {
  private readonly idle: UpstreamConnection[] = [];
  private readonly all = new Set<UpstreamConnection>();
  private closed = false;

  constructor(
    private readonly origin: string,
    private readonly tls: PoolTls | undefined,
  ) {}

  /** A connection for one request; given back with {@link give} once undici is done with the request. */
  private take(): UpstreamConnection {
    const c = this.idle.pop();
    if (c !== undefined) return c;
    const fresh = new UpstreamConnection(this.origin, this.tls);
    this.all.add(fresh);
    return fresh;
  }

  /** The request on `c` completed (`ok`: its response was read to the end) or failed. */
  give(c: UpstreamConnection, ok: boolean): void {
    if (ok) c.served++;
    if (c.client.destroyed) return void this.all.delete(c);
    if (!this.closed && this.idle.length < MAX_IDLE) return void this.idle.push(c);
    this.all.delete(c);
    void c.client.destroy().catch(() => undefined);
  }

  /** Send one request on a pooled connection; `events` hear what happens to it. */
  send<X>(ex: X, opts: Dispatcher.DispatchOptions, events: AttemptEvents<X>): UpstreamAttempt<X> {
    const conn = this.take();
    const attempt = new UpstreamAttempt(ex, conn, this, events);
    conn.client.dispatch(opts, attempt);
    return attempt;
  }

  /** Connections with an open socket, busy or idle (for tests and diagnostics). */
  get open(): number {
    let n = 0;
    for (const c of this.all) if (c.connected) n++;
    return n;
  }

  /** Close every connection (the replica left the table). */
  destroy(): void {
    this.closed = true;
    this.idle.length = 0;
    for (const c of this.all) void c.client.destroy().catch(() => undefined);
    this.all.clear();
  }
}
