import { PinChanges } from './pin-changes.js';
import { RecencyList } from './recency-list.js';
import { TargetTable } from './target-table.js';
import { ShardedMap, stringShard } from './sharded-map.js';
import type { PinTarget } from './pin-target.js';

export type { PinCount, PinTarget } from './pin-target.js';

/**
 * The session directory: session id → pinned replica, LRU-capped and idle-TTL'd (contract §4).
 *
 * Layout (1,000,000 sessions in ~130 bytes each): a sharded `Map<string, slot>` whose values are small
 * integers, the per-session fields in typed arrays indexed by slot (no object per session), and a
 * RecencyList over the slots: its head is the least recently used entry and, since TTL is idle
 * time, the first to expire, so eviction and sweeping only look at the head. O(1) per operation.
 *
 * Releasing every pin of a replica (drain, removal) is O(1): the epoch of its `pinning` moves on and
 * entries holding the old epoch read as released. They do not count against the cap and are dropped
 * when they reach the head (the map never holds more than twice the cap).
 */

export type PinLookup<T extends PinTarget> =
  | { readonly status: 'live'; readonly target: T; readonly lastUsed: number }
  | { readonly status: 'expired'; readonly target: T }
  | { readonly status: 'released'; readonly target: T }
  | { readonly status: 'none' };

/**
 * Live pins a slice at a time (`SessionDirectory.openPass`): `next` offers the pins of up to `max`
 * slots to `visit` and returns true while slots remain; `visit` returns false to stop at a pin
 * without taking it (the next call offers it again). Entries made after the pass opened are left to
 * the next pass, so no id is seen twice however the map changes between slices.
 */
export interface PinPass<T extends PinTarget> {
  next(now: number, max: number, visit: (id: string, target: T) => boolean): boolean;
  close(): void;
}

const NONE = { status: 'none' } as const;
const INITIAL_CAPACITY = 1024;

export class SessionDirectory<T extends PinTarget> {
  /** Id → slot, sharded so that no insertion rebuilds a million-entry hash table (sharded-map.ts). */
  private readonly map = new ShardedMap<string, number>(stringShard);
  private capacity = INITIAL_CAPACITY;
  private targetOf = new Int32Array(INITIAL_CAPACITY);
  private epochOf = new Int32Array(INITIAL_CAPACITY);
  private lastUsedOf = new Float64Array(INITIAL_CAPACITY);
  /**
   * When the pin was last agreed with the shared store (-Infinity: never). Allocated on the first
   * `markSynced`, i.e. only with a shared store: 8 MB less at 1,000,000 sessions without one.
   */
  private syncedAtOf: Float64Array | undefined;
  /** Slots from least to most recently used. */
  private readonly order = new RecencyList(INITIAL_CAPACITY);
  /** The id stored in each slot (the same string the map holds as its key). */
  private idOf: string[] = [];
  private readonly freeSlots: number[] = [];
  private nextSlot = 0;
  private readonly targets = new TargetTable<T>();
  /** Entries whose pin was released but that are still in the map. */
  private stale = 0;
  /** Slots handed out since the open pass began (it leaves their entries to the next pass). */
  private born: Set<number> | undefined;
  evictedLru = 0;
  evictedTtl = 0;
  /** Which pins changed, for the state file's journal; only kept once `trackChanges` was called. */
  changes: PinChanges<T> | undefined;

  constructor(
    private ttl: number,
    readonly maxSessions: number,
  ) {
    if (!(ttl > 0)) throw new RangeError(`session ttl must be positive, got ${ttl}`);
    if (!Number.isInteger(maxSessions) || maxSessions < 1) {
      throw new RangeError(`max sessions must be a positive integer, got ${maxSessions}`);
    }
  }

  get ttlMs(): number {
    return this.ttl;
  }

  /** A config reload: pins expire `ms` after their last use from now on. */
  setTtl(ms: number): void {
    if (!(ms > 0)) throw new RangeError(`session ttl must be positive, got ${ms}`);
    this.ttl = ms;
  }
  /** Live pins (released and expired-but-unswept entries excluded once swept). */
  get size(): number {
    return this.map.size - this.stale;
  }

  lookup(id: string, now: number): PinLookup<T> {
    const s = this.map.get(id);
    return s === undefined ? NONE : this.statusOf(s, now);
  }

  /**
   * `lookup` and, when the pin is live, mark it used now: what routing does on every request that
   * keeps its replica, with one hash lookup instead of two (lookup then pin).
   */
  touch(id: string, now: number): PinLookup<T> {
    const s = this.map.get(id);
    if (s === undefined) return NONE;
    const found = this.statusOf(s, now);
    if (found.status === 'live') {
      this.lastUsedOf[s] = now;
      this.order.moveToTail(s);
    }
    return found;
  }

  /** Pin (or re-pin) `id` to `target` and mark it used now. */
  pin(id: string, target: T, now: number): void {
    const tid = this.targets.intern(target);
    const s = this.map.get(id);
    if (s !== undefined) {
      const oldTarget = this.targets.at(this.targetOf[s]);
      const wasLive = this.epochOf[s] === oldTarget.pinning.epoch;
      if (oldTarget !== target || !wasLive) {
        this.changes?.mark(id);
        this.forget(s);
        this.targetOf[s] = tid;
        this.epochOf[s] = target.pinning.epoch;
        target.pinning.pinned();
      }
      this.lastUsedOf[s] = now;
      this.order.moveToTail(s);
      // A released entry pinned again is one more live pin, as a new entry would be.
      if (!wasLive && this.size > this.maxSessions) this.evictOverCap(now);
      return;
    }
    this.changes?.mark(id);
    const slot = this.allocate();
    this.born?.add(slot);
    this.targetOf[slot] = tid;
    this.epochOf[slot] = target.pinning.epoch;
    this.lastUsedOf[slot] = now;
    if (this.syncedAtOf !== undefined) this.syncedAtOf[slot] = -Infinity;
    this.idOf[slot] = id;
    this.order.append(slot);
    this.map.set(id, slot);
    target.pinning.pinned();
    if (this.map.size > this.maxSessions) this.evictOverCap(now);
  }

  /** Milliseconds since the pin was last agreed with the shared store (Infinity when never). */
  syncAge(id: string, now: number): number {
    const s = this.map.get(id);
    return s === undefined || this.syncedAtOf === undefined ? Infinity : now - this.syncedAtOf[s];
  }

  markSynced(id: string, now: number): void {
    const s = this.map.get(id);
    if (s === undefined) return;
    this.syncedAtOf ??= new Float64Array(this.capacity).fill(-Infinity);
    this.syncedAtOf[s] = now;
  }

  /** Remove a pin; true when there was a live one. */
  unpin(id: string, now: number): boolean {
    const s = this.map.get(id);
    if (s === undefined) return false;
    const live = this.isLive(s) && now - this.lastUsedOf[s] <= this.ttlMs;
    this.drop(s);
    return live;
  }

  /** Start recording which pins change (`changes`), for a writer that journals them. */
  trackChanges(limit: number): PinChanges<T> {
    return (this.changes ??= new PinChanges<T>(limit));
  }

  /** Release every pin to `target` at once. */
  release(target: T): void {
    this.stale += target.pinning.count;
    if (target.pinning.count > 0) this.changes?.release(target);
    target.pinning.releaseAll();
  }

  /**
   * Live pins at `now`, without changing anything (a read for /health, /metrics and the admin
   * API): `size` less the expired entries the next sweep will drop. O(expired).
   */
  liveCount(now: number): number {
    let expired = 0;
    for (let s = this.order.head; s >= 0; s = this.order.after(s)) {
      if (!this.isLive(s)) continue;
      if (now - this.lastUsedOf[s] <= this.ttlMs) break;
      expired++;
    }
    return this.size - expired;
  }

  /** Drop expired entries (and stale ones met on the way) from the head; O(removed). */
  sweep(now: number): number {
    let removed = 0;
    while (this.order.head >= 0) {
      const s = this.order.head;
      if (!this.isLive(s)) {
        this.drop(s);
      } else if (now - this.lastUsedOf[s] > this.ttlMs) {
        this.evictedTtl++;
        this.drop(s);
      } else {
        break;
      }
      removed++;
    }
    return removed;
  }

  /** Live pins in slot order for a writer that yields between slices (the state file); one pass at a time. */
  openPass(): PinPass<T> {
    const born = (this.born = new Set<number>());
    let s = 0;
    const next = (now: number, max: number, visit: (id: string, target: T) => boolean): boolean => {
      for (const end = Math.min(this.nextSlot, s + max); s < end; s++) {
        const id = this.idOf[s];
        if (id !== '' && this.isLive(s) && now - this.lastUsedOf[s] <= this.ttlMs && !born.has(s) && !visit(id, this.targets.at(this.targetOf[s]))) return true;
      }
      return s < this.nextSlot;
    };
    return { next, close: () => void (this.born === born && (this.born = undefined)) };
  }

  /**
   * Over the cap of live pins: the least recently used goes (expired ones are the LRU). Released
   * (stale) entries do not count against the cap, so they never push a live pin out; they are
   * dropped as they reach the front, and the map never holds more than twice the cap.
   */
  private evictOverCap(now: number): void {
    while ((this.map.size - this.stale > this.maxSessions || this.map.size > 2 * this.maxSessions) && this.order.head >= 0) {
      const s = this.order.head;
      if (this.isLive(s)) {
        if (now - this.lastUsedOf[s] > this.ttlMs) this.evictedTtl++;
        else this.evictedLru++;
      }
      this.drop(s);
    }
  }

  private statusOf(s: number, now: number): PinLookup<T> {
    const target = this.targets.at(this.targetOf[s]);
    if (this.epochOf[s] !== target.pinning.epoch) return { status: 'released', target };
    const lastUsed = this.lastUsedOf[s];
    if (now - lastUsed > this.ttlMs) return { status: 'expired', target };
    return { status: 'live', target, lastUsed };
  }

  private isLive(s: number): boolean {
    return this.epochOf[s] === this.targets.at(this.targetOf[s]).pinning.epoch;
  }

  /** Remove an entry; a live one is a change (a released one was recorded by its `release`). */
  private drop(s: number): void {
    if (this.changes !== undefined && this.isLive(s)) this.changes.mark(this.idOf[s]);
    this.map.delete(this.idOf[s]);
    this.idOf[s] = '';
    this.order.remove(s);
    this.forget(s);
    this.freeSlots.push(s);
  }

  /** Account for an entry leaving its target (removed or re-pointed). */
  private forget(s: number): void {
    const t = this.targets.at(this.targetOf[s]);
    if (this.epochOf[s] === t.pinning.epoch) t.pinning.unpinned();
    else this.stale--;
  }

  private allocate(): number {
    const free = this.freeSlots.pop();
    if (free !== undefined) return free;
    if (this.nextSlot === this.capacity) this.grow();
    return this.nextSlot++;
  }

  private grow(): void {
    const cap = Math.min(this.capacity * 2, 2 * this.maxSessions + 1);
    const next = Math.max(cap, this.capacity + 1);
    const copy = <A extends Int32Array | Float64Array>(a: A, make: (n: number) => A): A => {
      const b = make(next);
      b.set(a);
      return b;
    };
    this.targetOf = copy(this.targetOf, (n) => new Int32Array(n));
    this.epochOf = copy(this.epochOf, (n) => new Int32Array(n));
    this.lastUsedOf = copy(this.lastUsedOf, (n) => new Float64Array(n));
    if (this.syncedAtOf !== undefined) this.syncedAtOf = copy(this.syncedAtOf, (n) => new Float64Array(n).fill(-Infinity));
    this.order.grow(next);
    this.capacity = next;
  }
}

/** The directory as every module but routing (its one writer) sees it: reads only. */
export type SessionsView<T extends PinTarget> = Readonly<
  Pick<SessionDirectory<T>, 'size' | 'lookup' | 'liveCount' | 'trackChanges' | 'openPass' | 'ttlMs' | 'maxSessions' | 'evictedLru' | 'evictedTtl'>
>;
