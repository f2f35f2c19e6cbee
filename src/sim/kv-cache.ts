/**
 * The simulator's prefix KV-cache model.
 *
 * Tokens: the simulator has no tokenizer. A prompt's "tokens" are its whitespace-separated words
 * ({@link tokenize}) — a deterministic, cheap proxy: the same text always gives the same tokens,
 * and a shared text prefix gives a shared token prefix, which is all prefix caching needs.
 *
 * Blocks: the token list is cut into blocks of `blockSize` tokens. A block is identified by a
 * rolling hash of ALL tokens from the start of the prompt to the end of that block, so a block
 * only hits when the whole prefix before it matches (as in vLLM's prefix caching). A trailing
 * partial block is never cached.
 *
 * Cache: an LRU of `capacityBlocks` block hashes. Per request, cached tokens =
 * `blockSize` × the number of leading blocks present; then every full block of the prompt is
 * inserted (hits are touched, i.e. become most recently used), evicting the least recently used.
 */

/** Splits text into whitespace-separated words: the simulator's stand-in for tokens. */
export function tokenize(text: string): string[] {
  const words = text.split(/\s+/);
  if (words.length > 0 && words[0] === '') words.shift();
  if (words.length > 0 && words[words.length - 1] === '') words.pop();
  return words;
}

/** What one request found in the cache. */
export interface CacheLookup {
  readonly promptTokens: number;
  readonly cachedTokens: number;
}

/**
 * The block key of every full block of `tokens`: two independent 32-bit multiplicative hashes
 * rolled over every character (with a separator after each token, so `["ab","c"]` differs from
 * `["a","bc"]`) and packed into one 53-bit integer.
 */
export function blockHashes(tokens: readonly string[], blockSize: number): number[] {
  const out: number[] = [];
  let h1 = 0x811c9dc5;
  let h2 = 0x9747b28c;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] ?? '';
    for (let j = 0; j < token.length; j++) {
      const c = token.charCodeAt(j);
      h1 = Math.imul(h1 ^ c, 0x01000193);
      h2 = Math.imul(h2 ^ c, 0x5bd1e995);
      h2 ^= h2 >>> 15;
    }
    h1 = Math.imul(h1 ^ 0x1f, 0x01000193);
    h2 = Math.imul(h2 ^ 0x1f, 0x5bd1e995);
    h2 ^= h2 >>> 15;
    if ((i + 1) % blockSize === 0) out.push((h1 >>> 0) * 0x200000 + (h2 >>> 11));
  }
  return out;
}

/** LRU of prefix-block hashes; see the file comment for the model. */
export class KvCacheModel {
  /** Insertion order = recency order: the first key is the least recently used. */
  private readonly blocks = new Map<number, true>();

  /**
   * @param blockSize tokens per block (≥ 1)
   * @param capacityBlocks blocks the cache holds (≥ 1)
   */
  constructor(
    readonly blockSize: number,
    readonly capacityBlocks: number,
  ) {
    if (!Number.isInteger(blockSize) || blockSize < 1) {
      throw new RangeError(`KvCacheModel: blockSize must be a positive integer, got ${blockSize}`);
    }
    if (!Number.isInteger(capacityBlocks) || capacityBlocks < 1) {
      throw new RangeError(`KvCacheModel: capacityBlocks must be a positive integer, got ${capacityBlocks}`);
    }
  }

  /** Number of blocks currently cached. */
  get size(): number {
    return this.blocks.size;
  }

  /** Looks `tokens` up (leading-block hits) and then inserts all its full blocks. */
  admit(tokens: readonly string[]): CacheLookup {
    const hashes = blockHashes(tokens, this.blockSize);
    let hits = 0;
    while (hits < hashes.length && this.blocks.has(hashes[hits] ?? -1)) hits++;
    for (const hash of hashes) {
      this.blocks.delete(hash);
      this.blocks.set(hash, true);
      if (this.blocks.size > this.capacityBlocks) {
        const oldest = this.blocks.keys().next();
        if (oldest.done !== true) this.blocks.delete(oldest.value);
      }
    }
    return { promptTokens: tokens.length, cachedTokens: hits * this.blockSize };
  }

  /** Drops every cached block. */
  clear(): void {
    this.blocks.clear();
  }
}
