import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { PrefixIndex } from './prefix-index.js';

interface T {
  readonly name: string;
}
const r0: T = { name: 'r0' };
const r1: T = { name: 'r1' };

describe('PrefixIndex', () => {
  it('finds the longest recorded prefix of a chain and the target that served it', () => {
    const ix = new PrefixIndex<T>(100);
    ix.record([1, 2, 3], r0);
    assert.deepEqual(ix.match([1, 2, 3, 4, 5]), { target: r0, blocks: 3 });
    assert.deepEqual(ix.match([1, 2]), { target: r0, blocks: 2 });
    assert.equal(ix.match([9, 8]), undefined);
    assert.equal(ix.match([]), undefined);
  });

  it('the last target to serve a block holds it', () => {
    const ix = new PrefixIndex<T>(100);
    ix.record([1, 2, 3], r0);
    ix.record([1, 2, 3, 4], r1);
    assert.deepEqual(ix.match([1, 2, 3, 4]), { target: r1, blocks: 4 });
    assert.equal(ix.size, 4);
  });

  it('never holds more than its cap, dropping the least recently recorded first', () => {
    const ix = new PrefixIndex<T>(3);
    ix.record([1, 2, 3], r0);
    ix.record([1], r0); // 1 is now the most recent
    ix.record([4], r1);
    assert.equal(ix.size, 3);
    assert.equal(ix.evicted, 1);
    assert.deepEqual(ix.match([1, 2]), { target: r0, blocks: 1 }); // 2 went
    assert.deepEqual(ix.match([4]), { target: r1, blocks: 1 });
  });

  it('ignores every entry of a released target, and records it afresh afterwards', () => {
    const ix = new PrefixIndex<T>(100);
    ix.record([1, 2], r0);
    ix.record([7], r1);
    ix.release(r0);
    assert.equal(ix.match([1, 2]), undefined);
    assert.deepEqual(ix.match([7]), { target: r1, blocks: 1 });
    ix.record([1], r0);
    assert.deepEqual(ix.match([1, 2]), { target: r0, blocks: 1 });
  });

  it('compares the whole hash: two hashes sharing the low 30 bits never match each other', () => {
    const ix = new PrefixIndex<T>(100);
    const a = 5;
    const b = 5 + 2 ** 30;
    ix.record([a], r0);
    assert.equal(ix.match([b]), undefined);
    ix.record([b], r1);
    assert.equal(ix.match([a]), undefined); // replaced: the index is approximate
    assert.deepEqual(ix.match([b]), { target: r1, blocks: 1 });
    assert.equal(ix.size, 1);
  });

  it('property: size stays within the cap and the last recorded chain always matches in full', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.array(fc.nat(2 ** 40), { minLength: 1, maxLength: 20 }), { minLength: 1, maxLength: 30 }),
        (cap, chains) => {
          const ix = new PrefixIndex<T>(cap);
          for (const c of chains) {
            ix.record(c, r0);
            assert.ok(ix.size <= cap);
          }
          const last = chains[chains.length - 1];
          // Its final block is the most recent entry, so it is held (unless a later block of the same chain shared its slot).
          const m = ix.match(last);
          assert.equal(m?.target, r0);
          assert.equal(m?.blocks, last.length);
        },
      ),
    );
  });
});
