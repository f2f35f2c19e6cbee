/**
 * The session directory: session id → pinned replica, LRU-capped and idle-TTL'd (SPEC §4).
 *
 * A JS Map keeps insertion order and every touch re-inserts, so the map is ordered by last use:
 * the front is both the least recently used and the first to expire. Eviction and sweeping are
 * therefore O(entries removed), lookups O(1).
 *
 * Releasing every pin of a replica (drain, removal) is O(1): the replica's `pinEpoch` moves on and
 * entries holding the old epoch read as released. Such stale entries are dropped when met.
 */

/** What a session is pinned to. The registry's replica objects satisfy it structurally. */
export interface PinTarget {
  readonly name: string;
  /** Bumped to release every pin at once. */
  pinEpoch: number;
  /** Live pins to this target, kept by the directory. */
  pins: number;
}

class Entry<T extends PinTarget> {
  /** When this pin was last agreed with the shared store (-Infinity: never). */
  syncedAt = -Infinity;
  constructor(
    public target: T,
    public epoch: number,
    public lastUsed: number,
  ) {}
}

export type PinLookup<T extends PinTarget> =
  | { readonly status: 'live'; readonly target: T; readonly lastUsed: number }
  | { readonly status: 'expired'; readonly target: T }
  | { readonly status: 'released'; readonly target: T }
  | { readonly status: 'none' };

const NONE = { status: 'none' } as const;

export interface DirectoryStats {
  readonly size: number;
  readonly evictedLru: number;
  readonly evictedTtl: number;
}

export class SessionDirectory<T extends PinTarget> {
  private readonly map = new Map<string, Entry<T>>();
  /** Entries whose pin was released but that are still in the map. */
  private stale = 0;
  evictedLru = 0;
  evictedTtl = 0;
  /** Bumped whenever a pin is created, moved or removed (not on a plain touch): persistence polls it. */
  version = 0;

  constructor(
    readonly ttlMs: number,
    readonly maxSessions: number,
  ) {
    if (!(ttlMs > 0)) throw new RangeError(`session ttl must be positive, got ${ttlMs}`);
    if (!Number.isInteger(maxSessions) || maxSessions < 1) {
      throw new RangeError(`max sessions must be a positive integer, got ${maxSessions}`);
    }
  }

  /** Live pins (released and expired-but-unswept entries excluded once swept). */
  get size(): number {
    return this.map.size - this.stale;
  }

  lookup(id: string, now: number): PinLookup<T> {
    const e = this.map.get(id);
    if (e === undefined) return NONE;
    if (e.epoch !== e.target.pinEpoch) return { status: 'released', target: e.target };
    if (now - e.lastUsed > this.ttlMs) return { status: 'expired', target: e.target };
    return { status: 'live', target: e.target, lastUsed: e.lastUsed };
  }

  /** Pin (or re-pin) `id` to `target` and mark it used now. */
  pin(id: string, target: T, now: number): void {
    const e = this.map.get(id);
    if (e !== undefined) {
      if (e.target !== target || e.epoch !== target.pinEpoch) this.version++;
      this.map.delete(id);
      this.forgetEntry(e);
      e.target = target;
      e.epoch = target.pinEpoch;
      e.lastUsed = now;
      this.map.set(id, e);
    } else {
      this.version++;
      this.map.set(id, new Entry(target, target.pinEpoch, now));
      if (this.map.size > this.maxSessions) this.evictFront(now);
    }
    target.pins++;
  }

  /** Milliseconds since the pin was last agreed with the shared store (Infinity when never). */
  syncAge(id: string, now: number): number {
    const e = this.map.get(id);
    return e === undefined ? Infinity : now - e.syncedAt;
  }

  markSynced(id: string, now: number): void {
    const e = this.map.get(id);
    if (e !== undefined) e.syncedAt = now;
  }

  /** Remove a pin; true when there was a live one. */
  unpin(id: string, now: number): boolean {
    const e = this.map.get(id);
    if (e === undefined) return false;
    this.version++;
    this.map.delete(id);
    const live = e.epoch === e.target.pinEpoch && now - e.lastUsed <= this.ttlMs;
    this.forgetEntry(e);
    return live;
  }

  /** Release every pin to `target` at once. */
  release(target: T): void {
    this.stale += target.pins;
    if (target.pins > 0) this.version++;
    target.pins = 0;
    target.pinEpoch++;
  }

  /** Drop expired (and stale) entries from the front; O(removed). */
  sweep(now: number): number {
    let removed = 0;
    for (const [id, e] of this.map) {
      const isStale = e.epoch !== e.target.pinEpoch;
      if (!isStale && now - e.lastUsed <= this.ttlMs) break;
      this.map.delete(id);
      if (!isStale) this.evictedTtl++;
      this.forgetEntry(e);
      removed++;
    }
    return removed;
  }

  /** Live pins, least recently used first (state file, admin listing). */
  *livePins(now: number): Generator<{ id: string; target: T; lastUsed: number }> {
    for (const [id, e] of this.map) {
      if (e.epoch === e.target.pinEpoch && now - e.lastUsed <= this.ttlMs) yield { id, target: e.target, lastUsed: e.lastUsed };
    }
  }

  stats(): DirectoryStats {
    return { size: this.size, evictedLru: this.evictedLru, evictedTtl: this.evictedTtl };
  }

  /** Over the cap: expired entries go first (they sit at the front), then the least recently used. */
  private evictFront(now: number): void {
    while (this.map.size > this.maxSessions) {
      const first = this.map.entries().next();
      if (first.done === true) return;
      const [id, e] = first.value;
      this.map.delete(id);
      if (e.epoch === e.target.pinEpoch) {
        if (now - e.lastUsed > this.ttlMs) this.evictedTtl++;
        else this.evictedLru++;
      }
      this.forgetEntry(e);
    }
  }

  /** Account for an entry leaving the map (or being re-pointed). */
  private forgetEntry(e: Entry<T>): void {
    if (e.epoch === e.target.pinEpoch) e.target.pins--;
    else this.stale--;
  }
}
