import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { blockHashes, KvCacheModel, tokenize } from './kv-cache.js';

const words = (n: number, prefix = 'w'): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

describe('tokenize', () => {
  it('splits on any whitespace and drops empty edges', () => {
    assert.deepEqual(tokenize('  hello\tthere\n\nworld  '), ['hello', 'there', 'world']);
    assert.deepEqual(tokenize(''), []);
    assert.deepEqual(tokenize('   '), []);
  });
});

describe('blockHashes', () => {
  it('yields one hash per full block only', () => {
    assert.equal(blockHashes(words(47), 16).length, 2);
    assert.equal(blockHashes(words(48), 16).length, 3);
  });

  it('keys a block by its whole prefix, not by its own tokens', () => {
    const a = blockHashes(['x', 'b', 'c', 'd'], 2);
    const b = blockHashes(['y', 'b', 'c', 'd'], 2);
    assert.notEqual(a[1], b[1], 'same second block after a different first block');
  });

  it('does not confuse token boundaries', () => {
    assert.notDeepEqual(blockHashes(['ab', 'c'], 2), blockHashes(['a', 'bc'], 2));
  });
});

describe('KvCacheModel', () => {
  it('hits the leading full blocks of a repeated prompt', () => {
    const cache = new KvCacheModel(16, 4096);
    const prompt = words(40);
    assert.deepEqual(cache.admit(prompt), { promptTokens: 40, cachedTokens: 0 });
    assert.deepEqual(cache.admit(prompt), { promptTokens: 40, cachedTokens: 32 });
  });

  it('hits the shared prefix of a longer follow-up turn', () => {
    const cache = new KvCacheModel(16, 4096);
    cache.admit(words(40));
    const followUp = [...words(40), ...words(30, 'next')];
    assert.equal(cache.admit(followUp).cachedTokens, 32);
    assert.equal(cache.admit(followUp).cachedTokens, 64);
  });

  it('never caches a partial block', () => {
    const cache = new KvCacheModel(16, 4096);
    cache.admit(words(15));
    assert.equal(cache.admit(words(15)).cachedTokens, 0);
  });

  it('a changed early word invalidates every later block', () => {
    const cache = new KvCacheModel(16, 4096);
    const prompt = words(64);
    cache.admit(prompt);
    const changedFirst = ['CHANGED', ...prompt.slice(1)];
    assert.equal(cache.admit(changedFirst).cachedTokens, 0);
    const changedInThird = [...prompt.slice(0, 40), 'CHANGED', ...prompt.slice(41)];
    assert.equal(cache.admit(changedInThird).cachedTokens, 32, 'blocks 0 and 1 still match');
  });

  it('evicts the least recently used block and keeps touched ones', () => {
    const cache = new KvCacheModel(1, 2);
    cache.admit(['x']);
    cache.admit(['y']);
    assert.equal(cache.admit(['x']).cachedTokens, 1, 'touches x: y is now the oldest');
    cache.admit(['z']);
    assert.equal(cache.size, 2);
    assert.equal(cache.admit(['x']).cachedTokens, 1, 'x survived');
    assert.equal(cache.admit(['y']).cachedTokens, 0, 'y was evicted');
  });

  it('rejects a non-positive block size or capacity', () => {
    assert.throws(() => new KvCacheModel(0, 10), /blockSize must be a positive integer, got 0/);
    assert.throws(() => new KvCacheModel(16, 0), /capacityBlocks must be a positive integer, got 0/);
  });

  it('a repeated prompt always hits all its full blocks when the cache is large enough', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ minLength: 1, maxLength: 6 }), { maxLength: 200 }), fc.integer({ min: 1, max: 32 }), (tokens, blockSize) => {
        const cache = new KvCacheModel(blockSize, 1_000);
        const first = cache.admit(tokens);
        const second = cache.admit(tokens);
        assert.equal(first.cachedTokens, 0);
        assert.equal(second.cachedTokens, Math.floor(tokens.length / blockSize) * blockSize);
        assert.ok(cache.size <= 1_000);
      }),
    );
  });
});
