import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BLOCKS_PER_LOAD, preferCached } from './routing.policy.js';
import { table } from './routing-table.fake.js';

describe('first turns: a new conversation goes where a long part of its prompt is cached (issue 15 item 2)', () => {
  it('takes the holder of a long shared prefix while its load is within the allowance, then the least loaded', () => {
    const t = table(3);
    const hint = { target: t[2], blocks: 3 * BLOCKS_PER_LOAD };
    assert.equal(preferCached(t[0], hint, 8), t[2], 'equal load: the cached prefix wins over the rotation');
    t[2].load = 3;
    assert.equal(preferCached(t[0], hint, 8), t[2], '3 more in flight for 3 loads worth of prefix');
    t[2].load = 4;
    assert.equal(preferCached(t[0], hint, 8), t[0], 'one more spills to the least loaded');
  });

  it('never allows more than the slack, however long the match', () => {
    const t = table(2);
    const hint = { target: t[1], blocks: 100 * BLOCKS_PER_LOAD };
    t[1].load = 2;
    assert.equal(preferCached(t[0], hint, 2), t[1]);
    t[1].load = 3;
    assert.equal(preferCached(t[0], hint, 2), t[0]);
  });

  it('leaves a short match (a one-line system prompt), a full or an unroutable holder to the rotation', () => {
    const t = table(3);
    assert.equal(preferCached(t[1], { target: t[2], blocks: BLOCKS_PER_LOAD - 1 }, 8), t[1]);
    assert.equal(preferCached(t[1], undefined, 8), t[1]);
    t[2].full = true;
    assert.equal(preferCached(t[1], { target: t[2], blocks: 80 }, 8), t[1]);
    t[2].full = false;
    t[2].routable = false;
    assert.equal(preferCached(t[1], { target: t[2], blocks: 80 }, 8), t[1]);
  });
});
