/** Shards of a {@link ShardedMap}: at 1,000,000 keys about 4,000 each. */
export const SHARDS = 256;

/**
 * A `Map<string, V>` cut into {@link SHARDS} maps by a hash of the key, for the session directory.
 *
 * Why: V8's Map is a hash table that, once deletions have used up its free entries, rebuilds
 * itself whole on the next insertion. A directory at its cap deletes one entry for every one it
 * adds, so it rebuilds every (capacity − size) insertions: measured on this machine (Node 20),
 * a 1,000,000-entry Map held the event loop 380–405 ms per rebuild, and 39–45 ms at the default
 * 100,000. Shards rebuild one at a time, each ~1/256 of the whole (docs/design.md §5).
 */
export class ShardedMap<V> {
  private readonly shards: Map<string, V>[] = Array.from({ length: SHARDS }, () => new Map<string, V>());
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(key: string): V | undefined {
    return this.shardOf(key).get(key);
  }

  set(key: string, value: V): void {
    const m = this.shardOf(key);
    const before = m.size;
    m.set(key, value);
    this.count += m.size - before;
  }

  delete(key: string): boolean {
    const deleted = this.shardOf(key).delete(key);
    if (deleted) this.count--;
    return deleted;
  }

  /** FNV-1a over every UTF-16 unit: a client cannot pile its ids into one shard by their ends alone. */
  private shardOf(key: string): Map<string, V> {
    let h = 0x811c9dc5 | 0;
    for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
    return this.shards[(h ^ (h >>> 16)) & (SHARDS - 1)];
  }
}
