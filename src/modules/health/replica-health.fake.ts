/**
 * A replica's `GET /health` for the health specs: answers the status the test sets, or holds every
 * probe until the test releases it, and counts the probes. Test-only (`*.fake.ts` is not in the
 * prod build).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export class FakeReplicaHealth {
  /** The status every probe gets, or `hold`: keep the probe waiting until {@link release}. */
  answer: number | 'hold' = 200;
  /** Probes received so far. */
  probes = 0;
  private readonly held: http.ServerResponse[] = [];
  private heldWaiters: Array<() => void> = [];

  private constructor(private readonly server: http.Server) {}

  /** Listens on an ephemeral loopback port. */
  static async start(): Promise<FakeReplicaHealth> {
    let fake: FakeReplicaHealth | undefined;
    const server = http.createServer((req, res) => fake?.serve(req, res));
    fake = new FakeReplicaHealth(server);
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    return fake;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Probes waiting for an answer ({@link answer} `hold`). */
  get waiting(): number {
    return this.held.length;
  }

  /** Resolves once `n` probes are held. */
  whenWaiting(n: number): Promise<void> {
    if (this.held.length >= n) return Promise.resolve();
    return new Promise((resolve) => {
      const check = (): void => (this.held.length >= n ? resolve() : void this.heldWaiters.push(check));
      this.heldWaiters.push(check);
    });
  }

  /** Answers every held probe with `status`. */
  release(status: number): void {
    for (const res of this.held.splice(0)) res.writeHead(status).end();
  }

  async close(): Promise<void> {
    for (const res of this.held.splice(0)) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((done) => this.server.close(() => done()));
  }

  private serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.probes++;
    if (this.answer === 'hold') {
      this.held.push(res);
      const waiters = this.heldWaiters;
      this.heldWaiters = [];
      for (const w of waiters) w();
    } else res.writeHead(this.answer, { 'content-type': 'application/json' }).end('{"status":"ok"}');
  }
}
