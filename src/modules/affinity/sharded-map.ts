/**
 * Shards of a {@link ShardedMap}: at 1,000,000 keys ~15,600 each, whose table is a large object of
 * its own (freed whole when it grows). 256 shards cost ~18 MiB more RSS at 1,000,000 sessions
 * (tables on shared pages, fragmented as they grow); 64 rebuild in ≤ 8 ms (bench d).
 */
export const SHARDS = 64;

/** FNV-1a over every UTF-16 unit: a client cannot pile its ids into one shard by their ends alone. */
export function stringShard(key: string): number {
  let h = 0x811c9dc5 | 0;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h ^ (h >>> 16);
}

/** For keys that are already well-mixed hash bits (the prefix index's): the low bits. */
export const intShard = (key: number): number => key;

/**
 * A `Map<K, V>` cut into {@link SHARDS} maps by a hash of the key, for the session directory and
 * the prefix index.
 *
 * Why: V8's Map is a hash table that, once deletions have used up its free entries, rebuilds
 * itself whole on the next insertion. A directory at its cap deletes one entry for every one it
 * adds, so it rebuilds every (capacity − size) insertions: measured on this machine (Node 20),
 * a 1,000,000-entry Map held the event loop ~200–400 ms per rebuild, and 39–45 ms at 100,000. Shards rebuild one at a time, each ~1/64 of the whole (docs/design.md §5).
 */
export class ShardedMap<K, V> {
  private readonly shards: Map<K, V>[] = Array.from({ length: SHARDS }, () => new Map<K, V>());
  private count = 0;

  constructor(private readonly hash: (key: K) => number) {}

  get size(): number {
    return this.count;
  }

  get(key: K): V | undefined {
    return this.shardOf(key).get(key);
  }

  set(key: K, value: V): void {
    const m = this.shardOf(key);
    const before = m.size;
    m.set(key, value);
    this.count += m.size - before;
  }

  delete(key: K): boolean {
    const deleted = this.shardOf(key).delete(key);
    if (deleted) this.count--;
    return deleted;
  }

  private shardOf(key: K): Map<K, V> {
    return this.shards[this.hash(key) & (SHARDS - 1)];
  }
}
