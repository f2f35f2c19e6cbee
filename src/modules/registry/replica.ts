import type { EngineMetricsSpec } from '../../config/router-config.js';
import type { ReplicaEndpoint } from './replica-endpoint.js';
import type { ModelEntry } from './model-entry.js';
import { ReplicaHealth, type HealthResult } from './replica-health.js';

/** `shared`: a fleet replica another router leads (seen through Redis); routed to, never stopped here. */
export type ReplicaKind = 'static' | 'launched' | 'adopted' | 'shared';
export type ReplicaState = 'launching' | 'ready' | 'unready' | 'draining' | 'stopping' | 'failed';

/** Fleet facts about a launched or adopted replica. */
export interface ReplicaPlacement {
  readonly slot: string;
  readonly host: string;
  readonly devices: readonly number[];
  pid: number | null;
  readonly logPath: string;
  readonly launchedAt: string;
  readonly model?: string;
}

/** How a replica enters the table. */
export interface ReplicaInit {
  readonly ready: boolean;
  /** An existing server that is not ready yet shows `unready`, not `launching` (default: `ready`). */
  readonly everReady?: boolean;
  readonly maxInflight?: number | undefined;
  /** Models declared in the config (`models` of a static replica): never discovered (contract §4.3). */
  readonly models?: readonly string[] | undefined;
  /** Read its load from its engine's Prometheus endpoint (`engine` / `metrics_path` in the config). */
  readonly engineMetrics?: EngineMetricsSpec | undefined;
}

/** An in-flight exchange the fleet can cut (drain timeout). */
export interface Abortable {
  abort(reason: string): void;
}

/**
 * One row of the replica table. Mutable fields live here so the hot path touches one object, and
 * each has one writing module (docs/design.md, "Who writes what"; test/structure/ownership.test.ts
 * checks it): the registry (`index`, `removed`), health (`ready`, `everReady`, `failures`,
 * `successes`, `lastHealth`, `foreignLoad`), the fleet (`drain()`, `beginStop()`, `markFailed()`,
 * `placement.pid`), the proxy (what is in flight, through `occupy()` and `vacate()`), routing (`routed`, `slowness`,
 * `requestSeconds`, `batch`) and the session
 * directory (`pins`, `pinEpoch`).
 */
export class Replica {
  index = -1;
  routed = 0;
  pins = 0;
  pinEpoch = 0;
  /** Health's part (readiness, fall/rise counts, last probe, engine-reported load), changed only by health. */
  readonly health: ReplicaHealth;
  removed = false;
  /** The fleet's: out of rotation (cordon or drain), a stop begun, a launch that failed. */
  private cordoned = false;
  private stopBegun = false;
  private launchFailed = false;
  readonly engineMetrics: EngineMetricsSpec | undefined;
  /**
   * Speed-aware load (contract §4.2), kept by routing: seconds per request over the fleet median (1 =
   * as fast as the median, within tolerance), and the estimate itself (null: never measured).
   */
  slowness = 1;
  requestSeconds: number | null = null;
  /** Under speed-aware load, the replica's `max_inflight` (what it runs at once; routing.policy.ts `batch`). */
  batch: number | undefined = undefined;
  /**
   * Models it serves (contract §4.3), LoRA adapters included: declared, else its host's model until
   * discovery reads its `/v1/models`. Undefined while unknown: then it is a candidate for any model.
   */
  models: ReadonlySet<string> | undefined;
  /** The entries of its last readable `/v1/models` list (what `GET /v1/models` answers), kept by discovery. */
  modelList: readonly ModelEntry[] | undefined = undefined;
  /** Discovery's last read: true readable, false not (logged once, in a gauge), null not tried. */
  modelListOk: boolean | null = null;
  /** Its list was never readable for `--models-grace`: a candidate only for requests naming no model. */
  modelsUnknownTooLong = false;
  /** The config declared `models`: discovery leaves them alone. */
  readonly modelsDeclared: boolean;
  /** Exchanges and warm copies currently on this replica (the proxy's, through occupy/vacate). */
  private readonly onIt = new Set<Abortable>();
  private idleWaiters: Array<() => void> = [];

  /** Admission cap (`max_inflight`, contract §3): requests beyond it wait in the router's queue. */
  readonly maxInflight: number | undefined;

  private heldAs: ReplicaKind;
  private where: ReplicaPlacement | null;

  constructor(
    readonly name: string,
    kind: ReplicaKind,
    readonly endpoint: ReplicaEndpoint,
    placement: ReplicaPlacement | null,
    initial: ReplicaInit,
  ) {
    this.heldAs = kind;
    this.where = placement;
    this.health = new ReplicaHealth(initial.ready, initial.everReady ?? initial.ready);
    this.maxInflight = initial.maxInflight;
    this.engineMetrics = initial.engineMetrics;
    this.modelsDeclared = initial.models !== undefined;
    const expected = initial.models ?? (placement?.model !== undefined ? [placement.model] : undefined);
    this.models = expected === undefined ? undefined : new Set(expected);
  }

  get kind(): ReplicaKind {
    return this.heldAs;
  }

  get placement(): ReplicaPlacement | null {
    return this.where;
  }

  /**
   * The fleet's call when leadership moves (issue 26): the same running server is now led by this
   * router (`adopted`, with the placement adoption proved) or by another (`shared`). It stays in
   * the table with its health, in-flight requests and pins, so no request sees it disappear.
   */
  changeHands(kind: 'adopted' | 'shared', placement: ReplicaPlacement | null = this.where): void {
    this.heldAs = kind;
    this.where = placement;
  }

  /** A candidate for a request naming `model`: it lists it, or its list is not known yet (within `--models-grace`). */
  serves(model: string): boolean {
    return this.models === undefined ? !this.modelsUnknownTooLong : this.models.has(model);
  }

  get url(): string {
    return this.endpoint.url;
  }

  get ready(): boolean {
    return this.health.ready;
  }

  get everReady(): boolean {
    return this.health.everReady;
  }

  get lastHealth(): HealthResult | null {
    return this.health.lastHealth;
  }

  /** Out of rotation (a cordon, or a drain before a stop); the fleet's call, through {@link drain}. */
  get draining(): boolean {
    return this.cordoned;
  }

  /** Its stop has begun ({@link beginStop}). */
  get stopping(): boolean {
    return this.stopBegun;
  }

  /** Its launch failed ({@link markFailed}). */
  get failed(): boolean {
    return this.launchFailed;
  }

  /** The fleet takes it out of rotation (`true`: cordon or drain) or puts it back (`false`, a cordon only). */
  drain(out: boolean): void {
    this.cordoned = out;
  }

  /** The fleet begins its stop: out of rotation for good. */
  beginStop(): void {
    this.stopBegun = true;
    this.cordoned = true;
  }

  /** The fleet gave up on its launch. */
  markFailed(): void {
    this.launchFailed = true;
  }

  /** What the routing policy balances. */
  get load(): number {
    return this.outstanding + this.health.foreignLoad;
  }

  /** Ready (health's word), not draining (the fleet's), not failed, still in the table. */
  get routable(): boolean {
    return this.ready && !this.draining && !this.failed && !this.removed;
  }

  /** Resolves once none of this router's requests is in flight on it (at once when none is). */
  whenIdle(): Promise<void> {
    if (this.outstanding === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** This router's requests (and warm copies) in flight on it. */
  get outstanding(): number {
    return this.onIt.size;
  }

  /** What is in flight on it, for a drain that times out to cut. */
  get inflight(): ReadonlySet<Abortable> {
    return this.onIt;
  }

  /** The proxy sends `x` here: counted in its load and `max_inflight` until {@link vacate}. */
  occupy(x: Abortable): void {
    this.onIt.add(x);
  }

  /** `x` left, once per {@link occupy}: wakes `whenIdle()` waiters once nothing is in flight. */
  vacate(x: Abortable): void {
    this.onIt.delete(x);
    if (this.onIt.size !== 0 || this.idleWaiters.length === 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  /** At its `max_inflight`: takes no request until one of its own ends (contract §3 admission). */
  get full(): boolean {
    return this.maxInflight !== undefined && this.outstanding >= this.maxInflight;
  }

  get owned(): boolean {
    return this.kind === 'launched' || this.kind === 'adopted';
  }

  get state(): ReplicaState {
    if (this.failed) return 'failed';
    if (this.stopping) return 'stopping';
    if (this.draining) return 'draining';
    if (this.ready) return 'ready';
    return this.everReady ? 'unready' : 'launching';
  }
}
