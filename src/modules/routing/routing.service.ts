import { Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { AffinityService } from '../affinity/affinity.service.js';
import { SharedSessions } from '../affinity/shared-sessions.js';
import type { PinLookup } from '../affinity/session-directory.js';
import type { PromptChain } from '../affinity/prefix-hash.js';
import { RegistryService } from '../registry/registry.service.js';
import type { Replica } from '../registry/replica.js';
import { decide, leastOutstanding, type Decision, type PinState } from './routing.policy.js';

/**
 * Applies the pure policy to the live table and the session directory: looks the pin up, decides,
 * then pins, moves the cursor and counts. Synchronous, so select-then-acquire is atomic.
 */
@Injectable()
export class RoutingService {
  private readonly slack: number;
  private readonly policy: RouterConfig['routing']['policy'];
  private rr = 0;
  /** Rotating tie-break cursor of the policy (SPEC §4): moves past every non-affinity choice. */
  private counter = 0;
  private rejectedCount = 0;
  private affinityHitCount = 0;
  private readonly releaseListeners: Array<(r: Replica) => void> = [];
  private readonly prefixListeners: Array<(blocks: number) => void> = [];

  constructor(
    config: RouterConfig,
    private readonly registry: RegistryService,
    private readonly affinity: AffinityService,
    readonly shared: SharedSessions,
  ) {
    this.slack = config.routing.affinitySlack;
    this.policy = config.routing.policy;
    registry.onRemoved((r) => {
      affinity.directory.release(r);
      affinity.prefixes?.release(r);
      const n = registry.list.length;
      this.counter = n === 0 ? 0 : this.counter % n;
    });
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
    const dir = this.affinity.directory;
    if (dir.syncAge(sessionId, this.affinity.clock.now()) <= this.shared.cacheMs) return false;
    const name = await this.shared.fetch(sessionId);
    const r = name === undefined ? undefined : this.registry.get(name);
    if (r !== undefined && !r.removed) {
      const now = this.affinity.clock.now();
      const local = dir.lookup(sessionId, now);
      if (local.status !== 'live' || local.target !== r) dir.pin(sessionId, r, now);
    }
    return true;
  }

  /** `prefix`: the prompt's block-hash chain of a session-less request (SPEC §4.1). */
  route(sessionId: string, publish = false, prefix?: PromptChain): Decision<Replica> {
    const d = this.decideAndApply(sessionId, prefix);
    if (this.shared.enabled && d.kind !== 'none' && d.kind !== 'wait' && (publish || d.kind !== 'retain')) {
      this.shared.publish(sessionId, d.replica.name);
      this.affinity.directory.markSynced(sessionId, this.affinity.clock.now());
    }
    return d;
  }

  private decideAndApply(sessionId: string, prefix: PromptChain | undefined): Decision<Replica> {
    const now = this.affinity.clock.now();
    if (this.policy !== 'affinity') return this.baseline(sessionId, now);
    // A live pin is marked used here; a decision to retain it then needs no second write.
    const found = this.affinity.directory.touch(sessionId, now);
    const index = this.affinity.prefixes;
    const match = found.status === 'none' && prefix !== undefined ? index?.match(prefix.blocks) : undefined;
    // A match short of the first turn (a shared system prompt alone) is no conversation: `initialize`.
    const useful = match !== undefined && match.blocks >= prefix!.minMatch;
    const pin: PinState<Replica> = useful ? { status: 'prefix', replica: match.target } : toPinState(found);
    const d = decide(this.registry.list, this.counter, pin, this.slack);
    if (d.kind === 'none') {
      this.rejectedCount++;
      return d;
    }
    if (d.kind === 'wait') return d;
    if (prefix !== undefined && index !== undefined) {
      // Once per routed request (a queued one is counted when it leaves the queue).
      index.record(prefix.blocks, d.replica);
      for (const l of this.prefixListeners) l(match?.blocks ?? 0);
    }
    if (d.kind === 'retain') {
      d.replica.routed++;
      this.affinityHitCount++;
    } else if (d.kind === 'prefix') {
      // An affinity choice like a retain: the minted session is pinned, the cursor stays.
      this.affinity.directory.pin(sessionId, d.replica, now);
      d.replica.routed++;
    } else {
      this.apply(sessionId, d.replica, now);
    }
    return d;
  }

  /** Benchmark baselines: no affinity at all (round-robin, or least-outstanding alone). */
  private baseline(sessionId: string, now: number): Decision<Replica> {
    const list = this.registry.list;
    let r: Replica | undefined;
    if (this.policy === 'round-robin') {
      for (let i = 0; i < list.length && r === undefined; i++) {
        const c = list[(this.rr + i) % list.length];
        if (c.routable && !c.full) r = c;
      }
      this.rr = r === undefined ? this.rr : (r.index + 1) % list.length;
    } else {
      r = leastOutstanding(list, this.counter);
    }
    if (r === undefined) {
      if (list.some((x) => x.routable)) return { kind: 'wait' };
      this.rejectedCount++;
      return { kind: 'none' };
    }
    this.apply(sessionId, r, now);
    return { kind: 'initialize', replica: r };
  }

  /** After a connect failure on `failed`: the least-loaded other routable replica, pinned. */
  reroute(sessionId: string, failed: Replica): Replica | undefined {
    const r = leastOutstanding(this.registry.list, this.counter, failed);
    if (r !== undefined) {
      this.apply(sessionId, r, this.affinity.clock.now());
      this.shared.publish(sessionId, r.name);
    }
    return r;
  }

  /** Pin a session by hand (admin). */
  pin(sessionId: string, r: Replica): void {
    const now = this.affinity.clock.now();
    this.affinity.directory.pin(sessionId, r, now);
    this.shared.publish(sessionId, r.name);
    this.affinity.directory.markSynced(sessionId, now);
  }

  /** Unpin a session by hand (admin); true when it had a live pin. */
  unpin(sessionId: string): boolean {
    this.shared.unpin(sessionId);
    return this.affinity.directory.unpin(sessionId, this.affinity.clock.now());
  }

  /** Take a replica out of rotation for good or for a drain: its sessions re-route next turn. */
  releasePins(r: Replica): void {
    this.affinity.directory.release(r);
    this.affinity.prefixes?.release(r);
    for (const l of this.releaseListeners) l(r);
  }

  /** A replica left rotation (drain, cordon): admission re-checks what its queue can still reach. */
  onRelease(l: (r: Replica) => void): void {
    this.releaseListeners.push(l);
  }

  /** Every routed session-less request with a prompt: how many blocks of it the index matched (0: none). */
  onPrefixRouted(l: (blocks: number) => void): void {
    this.prefixListeners.push(l);
  }

  /** A new or moved pin: pinned, counted, and the tiebreak cursor moves past `r`. */
  private apply(sessionId: string, r: Replica, now: number): void {
    this.affinity.directory.pin(sessionId, r, now);
    r.routed++;
    const n = this.registry.list.length;
    if (n > 0) this.counter = (r.index + 1) % n;
  }
}

function toPinState(l: PinLookup<Replica>): PinState<Replica> {
  switch (l.status) {
    case 'none':
      return l;
    case 'live':
      return { status: 'live', replica: l.target };
    case 'expired':
      return { status: 'expired', replica: l.target };
    case 'released':
      return { status: 'released', replica: l.target, reason: l.target.removed ? 'removed' : 'draining' };
  }
}
