import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { intShard, ShardedMap, SHARDS, stringShard } from './sharded-map.js';

describe('ShardedMap', () => {
  it('property: any sequence of set/delete leaves it equal to a Map (get and size)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.string({ maxLength: 6 }), fc.nat(9)), { maxLength: 200 }), (ops) => {
        const m = new Map<string, number>();
        const s = new ShardedMap<string, number>(stringShard);
        for (const [put, key, value] of ops) {
          if (put) {
            m.set(key, value);
            s.set(key, value);
          } else {
            assert.equal(s.delete(key), m.delete(key));
          }
          assert.equal(s.size, m.size);
        }
        for (const [, key] of ops) assert.equal(s.get(key), m.get(key));
      }),
    );
  });

  it('property: with integer keys (intShard) it is a Map too', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 0x3fffffff })), { maxLength: 200 }), (ops) => {
        const m = new Map<number, number>();
        const s = new ShardedMap<number, number>(intShard);
        for (const [put, key] of ops) {
          if (put) {
            m.set(key, key);
            s.set(key, key);
          } else assert.equal(s.delete(key), m.delete(key));
          assert.equal(s.size, m.size);
        }
        for (const [, key] of ops) assert.equal(s.get(key), m.get(key));
      }),
    );
  });

  it('spreads keys over its shards: 100,000 ids of the router shape land in every shard', () => {
    const s = new ShardedMap<string, number>(stringShard);
    const seen = new Set<unknown>();
    const shardOf = (s as unknown as { shardOf(k: string): unknown }).shardOf.bind(s);
    for (let i = 0; i < 100_000; i++) {
      const id = i.toString(16).padStart(32, '0');
      s.set(id, i);
      seen.add(shardOf(id));
    }
    assert.equal(seen.size, SHARDS);
    assert.equal(s.size, 100_000);
  });
});
