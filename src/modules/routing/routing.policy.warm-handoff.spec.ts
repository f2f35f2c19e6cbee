import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { decide } from './routing.policy.js';
import { table } from './routing-table.fake.js';
import { warmHome } from './routing.policy.js';

describe('warm hand-off: the home of a new conversation', () => {
  it('is the replica with the fewest in flight when it is slower than the one serving the first turn', () => {
    const t = table([1, 1, 4]);
    t[0].load = 2;
    t[1].load = 3;
    t[2].load = 1; // expected wait 8 against 3: the first turn goes to r0, the conversation lives on r2
    const d = decide(t, 0, { status: 'none' }, 8);
    assert.equal(d.kind === 'initialize' && d.replica.name, 'r0');
    assert.equal(warmHome(t, 0, t[0])?.name, 'r2');
  });

  it('is none when the least loaded replica is the one serving, or no slower than it', () => {
    const t = table([1, 1, 4]);
    t[0].load = 2;
    t[1].load = 3;
    t[2].load = 3;
    // The served replica is busy but is the least loaded itself.
    assert.equal(warmHome(t, 0, t[0]), undefined);
    // The least loaded is another replica as fast as the served one.
    t[1].load = 1;
    assert.equal(warmHome(t, 0, t[0]), undefined);
    // An equally fast fleet never hands off, whatever the loads.
    const even = table([1, 1, 1]);
    even[0].load = 5;
    assert.equal(warmHome(even, 0, even[0]), undefined);
  });

  it('is none while the serving replica is not busy: below a quarter of its batch in flight, or 2 without one', () => {
    const t = table([1, 1, 4]);
    t[0].load = 1;
    assert.equal(warmHome(t, 2, t[0]), undefined);
    t[0].load = 2;
    assert.equal(warmHome(t, 2, t[0])?.name, 'r2');
    const batched = table([1, 1, 4]).map((r) => ({ ...r, batch: 16 }));
    batched[0].load = 3;
    assert.equal(warmHome(batched, 2, batched[0]), undefined);
    batched[0].load = 4;
    assert.equal(warmHome(batched, 2, batched[0])?.name, 'r2');
  });

  it('skips a slower replica that is full, unroutable or not a candidate, and ties go by the rotation', () => {
    const t = table([1, 4, 4]);
    t[0].load = 3;
    assert.equal(warmHome(t, 0, t[0])?.name, 'r1');
    assert.equal(warmHome(t, 2, t[0])?.name, 'r2');
    t[1].full = true;
    assert.equal(warmHome(t, 0, t[0])?.name, 'r2');
    t[2].routable = false;
    assert.equal(warmHome(t, 0, t[0]), undefined);
    t[2].routable = true;
    assert.equal(
      warmHome(t, 0, t[0], (r) => r.name !== 'r2'),
      undefined,
    );
  });
});
