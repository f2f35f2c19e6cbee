import { Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { Clock } from '../../common/clock.js';
import { SharedSessions } from '../affinity/shared-sessions.service.js';
import { SessionDirectory, type SessionsView } from '../affinity/session-directory.js';
import { PrefixIndex, type PrefixIndexView } from '../affinity/prefix-index.js';
import { bodyPromptChain } from '../affinity/prefix-hash.js';
import type { RequestKeys } from '../affinity/session-id.js';
import { RegistryService } from '../registry/registry.service.js';
import type { Replica } from '../registry/replica.js';
import { decide, leastOutstanding, livesOn, preferCached, warmHome, type Decision, type PinState } from './routing.policy.js';
import { servesModel, toPinState } from './pin-state.js';
import { ReplicaSpeeds } from './replica-speeds.js';
import type { RouteRequest } from './route-request.js';
import { RoutingMetrics } from './routing.metrics.js';

/**
 * Applies the pure policy to the live table and the session directory: looks the pin up, decides,
 * then pins, moves the cursor and counts. Synchronous, so select-then-acquire is atomic. The one
 * owner and writer of the session directory and the prefix index; the others read them through
 * {@link sessions} and {@link prefixIndex}.
 */
@Injectable()
export class RoutingService {
  private readonly warmHandoff: boolean;
  private rr = 0;
  /** Rotating tie-break cursor of the policy (contract §4): moves past every non-affinity choice. */
  private counter = 0;
  /** The same per requested model (contract §4.3): else two models taking turns find the same replica of the second first. */
  private readonly modelCounters = new Map<string, number>();
  private rejectedCount = 0;
  private affinityHitCount = 0;
  private readonly releaseListeners: Array<(r: Replica) => void> = [];
  /** Speed-aware load (contract §4.2) of the affinity policy; undefined with `routing.speed_aware` off. */
  readonly speeds: ReplicaSpeeds | undefined;
  private readonly directory: SessionDirectory<Replica>;
  /** Which replica last served which prompt prefix (contract §4.1); undefined when `prefix_affinity` is off. */
  private readonly prefixes: PrefixIndex<Replica> | undefined;
  /** The same two, read-only, for everyone else (admin, health, metrics, the state file). */
  readonly sessions: SessionsView<Replica>;
  readonly prefixIndex: PrefixIndexView<Replica> | undefined;

  constructor(
    /** Slack and policy are read at each decision: a config reload changes them for the next request. */
    private readonly config: RouterConfig,
    private readonly registry: RegistryService,
    readonly clock: Clock,
    readonly shared: SharedSessions,
    private readonly metrics: RoutingMetrics,
  ) {
    this.directory = new SessionDirectory<Replica>(config.routing.sessionTtlMs, config.routing.maxSessions);
    this.prefixes = config.routing.prefixAffinity ? new PrefixIndex<Replica>(config.routing.prefixBlocks) : undefined;
    this.sessions = this.directory;
    this.prefixIndex = this.prefixes;
    this.speeds = config.routing.speedAware && config.routing.policy === 'affinity' ? new ReplicaSpeeds(clock) : undefined;
    this.warmHandoff = config.routing.warmHandoff && this.speeds !== undefined;
    registry.onRemoved((r) => {
      this.speeds?.forget(r);
      this.directory.release(r);
      this.prefixes?.release(r);
      const n = registry.list.length;
      this.counter = n === 0 ? 0 : this.counter % n;
      this.modelCounters.clear();
    });
  }

  /** The TTL sweep (RoutingJobs, once a second): expired pins leave the directory. */
  sweepSessions(): void {
    // A config reload may have changed the TTL: taken here, within a second (docs/reload.md).
    if (this.directory.ttlMs !== this.config.routing.sessionTtlMs) this.directory.setTtl(this.config.routing.sessionTtlMs);
    this.directory.sweep(this.clock.now());
  }

  /** Requests refused because no replica was routable. */
  get rejected(): number {
    return this.rejectedCount;
  }

  /** Decisions that kept a session's pin (`retain`). */
  get affinityHits(): number {
    return this.affinityHitCount;
  }

  /**
   * With a shared store: agree with it before routing (at most one Redis read per `cacheMs` per
   * session). Returns whether the decision must be published even if it retains the pin.
   */
  async syncShared(sessionId: string): Promise<boolean> {
    const dir = this.directory;
    if (dir.syncAge(sessionId, this.clock.now()) <= this.shared.cacheMs) return false;
    const name = await this.shared.fetch(sessionId);
    const r = name === undefined ? undefined : this.registry.get(name);
    if (r !== undefined && !r.removed) {
      const now = this.clock.now();
      const local = dir.lookup(sessionId, now);
      if (local.status !== 'live' || local.target !== r) dir.pin(sessionId, r, now);
    }
    return true;
  }

  /**
   * {@link syncShared} for any request. A session-less one asks the shared store for its conversation
   * instead (first-turn chain hash → replica), so turns alternating between routers stay on one replica.
   */
  async syncRequest(keys: RequestKeys): Promise<{ publish: boolean; holder?: string }> {
    if (!this.shared.enabled) return NO_SYNC;
    if (keys.session.source !== 'minted') return { publish: await this.syncShared(keys.session.id) };
    if (keys.prefix === undefined) return { publish: true };
    return { publish: true, holder: await this.shared.fetchPrefix(keys.prefix) };
  }

  /** Whether routing a request of `sessionId` reads its body now: a first turn (no pin yet) with prefix affinity on. */
  readsBody(sessionId: string): boolean {
    return this.config.routing.policy === 'affinity' && this.prefixes !== undefined && this.directory.lookup(sessionId, this.clock.now()).status === 'none';
  }

  /** Decide where `req` goes and apply it: pinned, counted, and with a shared store, published. */
  route(req: RouteRequest): Decision<Replica> {
    const d = this.decideAndApply(req);
    if (this.shared.enabled && d.kind !== 'none' && d.kind !== 'wait') {
      const lives = livesOn(d);
      if (req.publish || d.kind !== 'retain') {
        this.directory.markSynced(req.sessionId, this.clock.now());
        this.shared.publish(req.sessionId, lives.name);
      }
      if (req.prefix !== undefined && req.holder !== lives.name) this.shared.publishPrefix(req.prefix, lives.name);
    }
    return d;
  }

  private decideAndApply(req: RouteRequest): Decision<Replica> {
    const now = this.clock.now();
    const { sessionId, prefix, model } = req;
    if (this.config.routing.policy !== 'affinity') return this.baseline(sessionId, now, model);
    // A live pin is marked used here; a decision to retain it then needs no second write.
    const found = this.directory.touch(sessionId, now);
    const index = this.prefixes;
    let chain = prefix;
    if (chain === undefined && found.status === 'none' && index !== undefined) {
      // The first turn of a session with an id (no pin yet, so nothing else decides): its prompt, read now or by the worker that read it.
      const c = req.firstTurn ?? (req.body === undefined ? undefined : bodyPromptChain(req.body));
      if (c !== undefined && c.blocks.length > 0) chain = c;
    }
    const match = found.status === 'none' && chain !== undefined ? index?.match(chain.blocks) : undefined;
    // Session-less: the replica another router last chose for this conversation, else a local match
    // covering the first turn. Shorter (a shared system prompt alone) is no conversation: `initialize`.
    const held = prefix === undefined ? undefined : this.holder(req.holder);
    const useful = prefix !== undefined && match !== undefined && match.blocks >= prefix.minMatch;
    const pinned = held ?? (useful ? match.target : undefined);
    const pin: PinState<Replica> = pinned !== undefined ? { status: 'prefix', replica: pinned } : toPinState(found);
    this.speeds?.refresh(this.registry.list);
    let d = decide(this.registry.list, this.cursor(model), pin, this.config.routing.affinitySlack, servesModel(model));
    if (d.kind === 'none') {
      this.rejectedCount++;
      return d;
    }
    if (d.kind === 'wait') return d;
    // A new conversation goes where a long part of its prompt is cached, within the load rule (routing.policy.ts, preferCached).
    // ... among the replicas serving the request's model.
    const cached = match !== undefined && (model === undefined || match.target.serves(model)) ? match : undefined;
    if (d.kind === 'initialize' && pin.status === 'none') {
      const served = preferCached(d.replica, cached, this.config.routing.affinitySlack);
      // A conversation drawn to a cached prefix lives there; otherwise maybe on a slower replica (routing.policy.ts, warmHome).
      const home = this.warmHandoff && served === d.replica ? warmHome(this.registry.list, this.cursor(model), served, servesModel(model)) : undefined;
      d = home === undefined ? { kind: 'initialize', replica: served } : { kind: 'initialize', replica: served, home };
    }
    if (chain !== undefined && index !== undefined) {
      // Once per routed request (a queued one is counted when it leaves the queue); a hand-off's blocks are its home's.
      index.record(chain.blocks, livesOn(d));
      // The match histogram counts session-less requests; a session's first turn only records.
      if (prefix !== undefined) this.metrics.prefixMatched(match?.blocks ?? 0);
    }
    if (d.kind === 'retain') {
      d.replica.routing.countRouted();
      this.affinityHitCount++;
    } else if (d.kind === 'prefix') {
      // An affinity choice like a retain: the minted session is pinned, the cursor stays.
      this.directory.pin(sessionId, d.replica, now);
      d.replica.routing.countRouted();
    } else {
      this.apply(sessionId, d.replica, now, model, livesOn(d));
    }
    return d;
  }

  /** A warm hand-off copy failed: re-pins the session (and a session-less prompt chain) from `home` to `served`, which has it cached. */
  warmFailed(req: RouteRequest, home: Replica, served: Replica): void {
    const { sessionId, prefix } = req;
    const now = this.clock.now();
    const l = this.directory.lookup(sessionId, now);
    if (l.status !== 'live' || l.target !== home || served.removed) return;
    this.directory.pin(sessionId, served, now);
    this.shared.publish(sessionId, served.name);
    if (prefix === undefined) return;
    this.prefixes?.record(prefix.blocks, served);
    this.shared.publishPrefix(prefix, served.name);
  }

  /** The replica a shared-store name stands for, if it is still in the table. */
  private holder(name: string | undefined): Replica | undefined {
    const r = name === undefined ? undefined : this.registry.get(name);
    return r === undefined || r.removed ? undefined : r;
  }

  /** Benchmark baselines: no affinity at all (round-robin, or least-outstanding alone). */
  private baseline(sessionId: string, now: number, model: string | undefined): Decision<Replica> {
    const list = this.registry.list;
    const candidate = servesModel(model);
    let r: Replica | undefined;
    if (this.config.routing.policy === 'round-robin') {
      for (let i = 0; i < list.length && r === undefined; i++) {
        const c = list[(this.rr + i) % list.length];
        if (c.routable && !c.full && (candidate === undefined || candidate(c))) r = c;
      }
      this.rr = r === undefined ? this.rr : (r.index + 1) % list.length;
    } else {
      r = leastOutstanding(list, this.cursor(model), undefined, candidate);
    }
    if (r === undefined) {
      if (list.some((x) => x.routable && (candidate === undefined || candidate(x)))) return { kind: 'wait' };
      this.rejectedCount++;
      return { kind: 'none' };
    }
    this.apply(sessionId, r, now, model);
    return { kind: 'initialize', replica: r };
  }

  /** After a connect failure on `failed`: the least-loaded other routable replica (serving the request's model), pinned. */
  reroute(req: RouteRequest, failed: Replica): Replica | undefined {
    const r = leastOutstanding(this.registry.list, this.cursor(req.model), failed, servesModel(req.model));
    if (r !== undefined) {
      this.apply(req.sessionId, r, this.clock.now(), req.model);
      this.shared.publish(req.sessionId, r.name);
    }
    return r;
  }

  /**
   * Where a first attempt that failed before `failed` saw it goes next: {@link reroute}, else (a
   * stale kept-alive socket, the replica still routable) `failed` itself on a new connection.
   */
  retryTarget(req: RouteRequest, failed: Replica, staleReuse: boolean): Replica | undefined {
    return this.reroute(req, failed) ?? (staleReuse && failed.routable ? failed : undefined);
  }

  /** Pin a session by hand (admin). */
  pin(sessionId: string, r: Replica): void {
    const now = this.clock.now();
    this.directory.pin(sessionId, r, now);
    this.shared.publish(sessionId, r.name);
    this.directory.markSynced(sessionId, now);
  }

  /** Unpin a session by hand (admin); true when it had a live pin. */
  unpin(sessionId: string): boolean {
    this.shared.unpin(sessionId);
    return this.directory.unpin(sessionId, this.clock.now());
  }

  /** Take a replica out of rotation for good or for a drain: its sessions re-route next turn. */
  releasePins(r: Replica): void {
    this.directory.release(r);
    this.prefixes?.release(r);
    for (const l of this.releaseListeners) l(r);
  }

  /** A replica left rotation (drain, cordon): admission re-checks what its queue can still reach. */
  onRelease(l: (r: Replica) => void): void {
    this.releaseListeners.push(l);
  }

  /** A new or moved pin (to `home`, by default `r`): pinned, `r` counted, and the tiebreak cursor moves past `r`. */
  private apply(sessionId: string, r: Replica, now: number, model?: string, home = r): void {
    this.directory.pin(sessionId, home, now);
    r.routing.countRouted();
    const n = this.registry.list.length;
    if (n > 0) this.counter = (r.index + 1) % n;
    if (n > 0 && model !== undefined) {
      // Bounded: a model name comes from the client (an unknown one reaches here only while some replica's list is unknown).
      if (this.modelCounters.size >= MAX_MODEL_CURSORS && !this.modelCounters.has(model)) this.modelCounters.clear();
      this.modelCounters.set(model, this.counter);
    }
  }

  /** The tie-break cursor of a request naming `model` (the shared one without a model, or for a model not seen yet). */
  private cursor(model: string | undefined): number {
    return model === undefined ? this.counter : (this.modelCounters.get(model) ?? this.counter);
  }
}

/** Without a shared store: nothing to publish, no other router's choice. */
const NO_SYNC = { publish: false } as const;

/** Most models with a cursor of their own (beyond it the cursors restart). */
const MAX_MODEL_CURSORS = 1024;
