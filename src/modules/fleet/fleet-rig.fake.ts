/**
 * The fleet's units (FleetBook, ReplicaLauncher, ReplicaStopper, FleetService) wired by hand for
 * module specs, around a RecordingTransport and hand-written stand-ins for routing, leadership and
 * the state file. One local host with one slot whose port nothing listens on, so a stop's "does it
 * still answer?" check gets a refused connection at once. Test-only (`*.fake.ts` is not in the
 * prod build).
 */
import { createServer, type AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';
import { Writable } from 'node:stream';
import { createAppLogger } from '../../common/logging/logger.js';
import type { RouterConfig, SlotSpec } from '../../config/router-config.js';
import type { LeaderService } from '../cluster/leader.service.js';
import type { LauncherFactory } from '../launcher/launcher.factory.js';
import { RecordingTransport } from '../launcher/transports/recording.transport.fake.js';
import { testSlot } from '../launcher/transports/replica-process.fake.js';
import { RegistryService } from '../registry/registry.service.js';
import type { Abortable, Replica } from '../registry/replica.js';
import type { RoutingService } from '../routing/routing.service.js';
import { FleetBook } from './fleet-book.service.js';
import { FleetService } from './fleet.service.js';
import { ReplicaLauncher } from './replica-launcher.service.js';
import { ReplicaStopper } from './replica-stopper.service.js';
import type { StateService } from '../state/state.service.js';
import { testHost } from '../../config/test-host.fake.js';

export interface FleetRigOptions {
  readonly launchTimeoutMs?: number;
  readonly drainTimeoutMs?: number;
  readonly transport?: 'local' | 'ssh';
}

export interface FleetRig {
  readonly transport: RecordingTransport;
  readonly registry: RegistryService;
  readonly book: FleetBook;
  readonly launcher: ReplicaLauncher;
  readonly fleet: FleetService;
  readonly slot: SlotSpec;
  /** Replicas whose pins routing was asked to release, in order. */
  readonly released: Replica[];
  readonly logs: Array<Record<string, unknown>>;
  /** Launch one replica and return it. */
  launchOne(): Promise<Replica>;
}

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((done) => srv.listen(0, '127.0.0.1', done));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((done) => srv.close(() => done()));
  return port;
}

export async function fleetRig(t: TestContext, o: FleetRigOptions = {}): Promise<FleetRig> {
  const host = testHost({ name: 'node', portBase: await closedPort(), logDir: '/tmp/affinity-router-spec' });
  const slot = testSlot(host);
  const config = {
    hosts: [host],
    slots: [slot],
    maxReplicas: 1,
    launchTimeoutMs: o.launchTimeoutMs ?? 60_000,
    drainTimeoutMs: o.drainTimeoutMs ?? 60_000,
    stopGraceMs: 0,
    health: { path: '/health', timeoutMs: 1_000 },
  } as unknown as RouterConfig;
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const log = createAppLogger('info', 'json', sink);
  const transport = new RecordingTransport(o.transport ?? 'local');
  const launchers = { forHost: () => transport } as unknown as LauncherFactory;
  const released: Replica[] = [];
  const routing = { releasePins: (r: Replica) => void released.push(r) } as unknown as RoutingService;
  const registry = new RegistryService();
  t.after(() => registry.onModuleDestroy());
  const book = new FleetBook(config, { enabled: false } as unknown as StateService);
  const stopper = new ReplicaStopper(config, book, registry, routing, log);
  const launcher = new ReplicaLauncher(config, book, registry, launchers, stopper, {}, log);
  const leader = { isLeader: true, leaderUrl: undefined } as unknown as LeaderService;
  const fleet = new FleetService(config, book, launcher, stopper, registry, routing, leader, log);
  const launchOne = async (): Promise<Replica> => {
    const [r] = await launcher.launch(1, undefined);
    return r;
  };
  return { transport, registry, book, launcher, fleet, slot, released, logs, launchOne };
}

/** A request in flight on `r`, as the proxy counts it; `end()` is the proxy's bookkeeping when it ends. */
export function inFlight(r: Replica): Abortable & { readonly aborted: string[]; end(): void } {
  const aborted: string[] = [];
  const ex = {
    aborted,
    abort: (reason: string) => void aborted.push(reason),
    end: () => r.vacate(ex),
  };
  r.occupy(ex);
  return ex;
}
