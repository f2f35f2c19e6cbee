import { RecencyList } from './recency-list.js';
import { TargetTable } from './target-table.js';
import { intShard, ShardedMap } from './sharded-map.js';

/**
 * Which replica last served which prompt prefix (contract §4.1): block hash → target, LRU-capped at
 * `maxBlocks` entries. Approximate by design: an engine's cache evicts on its own, so the index
 * only says where a prefix was sent, and stale guesses cost one prefill.
 *
 * Layout (56 bytes an entry when filled once, 83 under churn; docs/routing.md, "Requests without a session id"): a sharded `Map<number, slot>` keyed by
 * the low 30 bits of the 53-bit hash (a small integer, so no boxed key per entry), the full hash,
 * target and epoch in typed arrays by slot, and a RecencyList over the slots. Two hashes sharing the
 * low 30 bits share a slot: the later one replaces the earlier (≈ 500 of 1,000,000 entries), and a
 * lookup compares the full hash, so a collision loses an entry but never matches a wrong prefix.
 *
 * Releasing a target (drain, removal) is O(1): its epoch moves on and its entries read as misses
 * until they are overwritten or reach the head.
 */

const INITIAL_CAPACITY = 1024;
const KEY_MASK = 0x3fffffff;

/** The longest live match of a chain: its target and how many blocks it covers (≥ 1). */
export interface PrefixMatch<T> {
  readonly target: T;
  readonly blocks: number;
}

export class PrefixIndex<T extends object> {
  /** Low 30 hash bits → slot, sharded so that no insertion rebuilds a million-entry table (sharded-map.ts). */
  private readonly map = new ShardedMap<number, number>(intShard);
  private capacity = INITIAL_CAPACITY;
  private hashOf = new Float64Array(INITIAL_CAPACITY);
  private targetOf = new Int32Array(INITIAL_CAPACITY);
  private epochOf = new Int32Array(INITIAL_CAPACITY);
  private readonly order = new RecencyList(INITIAL_CAPACITY);
  private nextSlot = 0;
  private readonly targets = new TargetTable<T>();
  /** Per target id: entries written under an older epoch are released. */
  private readonly epochs: number[] = [];
  /** Entries dropped to stay within `maxBlocks`. */
  evicted = 0;

  constructor(readonly maxBlocks: number) {
    if (!Number.isInteger(maxBlocks) || maxBlocks < 1) {
      throw new RangeError(`prefix blocks must be a positive integer, got ${maxBlocks}`);
    }
  }

  /** Entries held (released ones included until they are dropped): what the memory bound counts. */
  get size(): number {
    return this.map.size;
  }

  /**
   * The longest prefix of `chain` whose last block is held by a live target, walking back from the
   * longest (a continuing conversation hits after its few new blocks). Does not reorder.
   */
  match(chain: readonly number[]): PrefixMatch<T> | undefined {
    for (let i = chain.length - 1; i >= 0; i--) {
      const h = chain[i];
      const s = this.map.get(h & KEY_MASK);
      if (s === undefined || this.hashOf[s] !== h) continue;
      const tid = this.targetOf[s];
      if (this.epochOf[s] !== this.epochs[tid]) continue;
      return { target: this.targets.at(tid), blocks: i + 1 };
    }
    return undefined;
  }

  /** `target` now serves every block of `chain`: each entry points to it and becomes the most recent. */
  record(chain: readonly number[], target: T): void {
    const tid = this.targetId(target);
    const epoch = this.epochs[tid];
    for (const h of chain) {
      const key = h & KEY_MASK;
      let s = this.map.get(key);
      if (s === undefined) {
        s = this.allocate();
        this.map.set(key, s);
        this.order.append(s);
      } else {
        this.order.moveToTail(s);
      }
      this.hashOf[s] = h;
      this.targetOf[s] = tid;
      this.epochOf[s] = epoch;
    }
  }

  /** Every entry of `target` reads as a miss from now on (drain, removal). */
  release(target: T): void {
    const tid = this.targets.find(target);
    if (tid !== undefined) this.epochs[tid]++;
  }

  /** A free slot: a new one while below the cap, else the least recently used entry's. */
  private allocate(): number {
    if (this.nextSlot < this.maxBlocks) {
      if (this.nextSlot === this.capacity) this.grow();
      return this.nextSlot++;
    }
    const s = this.order.head;
    this.order.remove(s);
    this.map.delete(this.hashOf[s] & KEY_MASK);
    this.evicted++;
    return s;
  }

  private targetId(t: T): number {
    const id = this.targets.intern(t);
    if (id === this.epochs.length) this.epochs.push(0);
    return id;
  }

  private grow(): void {
    const next = Math.min(this.capacity * 2, this.maxBlocks);
    const hashOf = new Float64Array(next);
    hashOf.set(this.hashOf);
    const targetOf = new Int32Array(next);
    targetOf.set(this.targetOf);
    const epochOf = new Int32Array(next);
    epochOf.set(this.epochOf);
    this.hashOf = hashOf;
    this.targetOf = targetOf;
    this.epochOf = epochOf;
    this.order.grow(next);
    this.capacity = next;
  }
}

/** The prefix index as every module but routing (its one writer) sees it: reads only. */
export type PrefixIndexView<T extends object> = Readonly<Pick<PrefixIndex<T>, 'size' | 'evicted' | 'maxBlocks' | 'match'>>;
