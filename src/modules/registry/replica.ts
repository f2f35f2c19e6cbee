import type { EngineMetricsSpec } from '../../config/router-config.js';
import type { ReplicaEndpoint } from './replica-endpoint.js';
import type { ModelEntry } from './model-entry.js';
import { ReplicaHealth, type HealthResult } from './replica-health.js';
import { ReplicaModels } from './replica-models.js';
import { ReplicaPins } from './replica-pins.js';
import { ReplicaRouting } from './replica-routing.js';

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
 * One row of the replica table. Its mutable state lives here so the hot path touches one object,
 * and each piece has one writing module (docs/design.md, "Who writes what"). The compiler checks it:
 * every mutable field is private, here or in a part, read through getters of the names callers use
 * and changed only through its owner's named methods (test/structure/ownership.fixture.ts writes
 * each from outside and must fail to compile; test/structure/ownership.test.ts keeps the calls in
 * the owner's folder). The registry's: position and removal (`placeAt()`, `markRemoved()`).
 * Health's: `health`, a `ReplicaHealth` (readiness, fall/rise counts, last probe, engine-reported
 * load), and `catalog`, a `ReplicaModels` (the models it serves and its last `/v1/models` list, kept
 * by model discovery). The fleet's: in rotation, stopping, failed (`drain()`, `beginStop()`,
 * `markFailed()`); `placement.pid` is the fleet's too, checked by the table. The proxy's: what is in
 * flight (`occupy()`, `vacate()`). Routing's: `routing`, a `ReplicaRouting` (requests routed,
 * speed-aware load). The session directory's (affinity): `pinning`, a `ReplicaPins` (live pins and
 * the epoch that releases them all).
 */
export class Replica {
  /** The registry's: position in the live table (-1 once removed) and whether it left the table. */
  private at = -1;
  private gone = false;
  /** Health's part (readiness, fall/rise counts, last probe, engine-reported load), changed only by health. */
  readonly health: ReplicaHealth;
  /** Routing's part (requests routed, speed-aware load, contract §4.2), changed only by routing. */
  readonly routing = new ReplicaRouting();
  /** The models it serves (contract §4.3) and its last list, changed only by health's model discovery. */
  readonly catalog: ReplicaModels;
  /** The session directory's part (live pins, release epoch), changed only by the directory. */
  readonly pinning = new ReplicaPins();
  /** The fleet's: out of rotation (cordon or drain), a stop begun, a launch that failed. */
  private cordoned = false;
  private stopBegun = false;
  private launchFailed = false;
  readonly engineMetrics: EngineMetricsSpec | undefined;
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
    this.catalog = new ReplicaModels(initial.models ?? (placement?.model !== undefined ? [placement.model] : undefined));
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

  /** Position in the live table (index order), -1 once removed. */
  get index(): number {
    return this.at;
  }

  /** Left the table. */
  get removed(): boolean {
    return this.gone;
  }

  /** The registry puts it at position `i` of the live table (on add, and when a removal closes the gap). */
  placeAt(i: number): void {
    this.at = i;
  }

  /** The registry took it out of the table. */
  markRemoved(): void {
    this.gone = true;
    this.at = -1;
  }

  /** Requests routing sent it. */
  get routed(): number {
    return this.routing.routed;
  }
  /** Speed-aware load (contract §4.2): seconds per request over the fleet median (1 = as fast as the median). */
  get slowness(): number {
    return this.routing.slowness;
  }
  /** The speed estimate itself (null: never measured). */
  get requestSeconds(): number | null {
    return this.routing.requestSeconds;
  }
  /** Under speed-aware load, the replica's `max_inflight` (what it runs at once; routing.policy.ts `batch`). */
  get batch(): number | undefined {
    return this.routing.batch;
  }

  /** Models it serves, LoRA adapters included; undefined while unknown (then a candidate for any model). */
  get models(): ReadonlySet<string> | undefined {
    return this.catalog.models;
  }
  /** The entries of its last readable `/v1/models` list (what `GET /v1/models` answers). */
  get modelList(): readonly ModelEntry[] | undefined {
    return this.catalog.list;
  }
  /** Discovery's last read: true readable, false not, null not tried. */
  get modelListOk(): boolean | null {
    return this.catalog.listOk;
  }
  /** Its list was never readable for `--models-grace`: a candidate only for requests naming no model. */
  get modelsUnknownTooLong(): boolean {
    return this.catalog.unknownTooLong;
  }

  /** Live pins to it (the session directory's count; its release epoch is `pinning.epoch`). */
  get pins(): number {
    return this.pinning.count;
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
