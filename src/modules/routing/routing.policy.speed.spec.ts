import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { affinityHeader, decide, expectedWait, type PinState } from './routing.policy.js';
import { table, type R } from './routing-table.fake.js';

describe('routing policy: speed-aware load (contract §4.2)', () => {
  it('expected wait is (load + 1) × slowness, slowness absent counting as 1', () => {
    assert.equal(expectedWait({ name: 'a', index: 0, routable: true, full: false, draining: false, load: 3 }), 4);
    assert.equal(expectedWait({ name: 'a', index: 0, routable: true, full: false, draining: false, load: 3, slowness: 4 }), 16);
  });

  it('new conversations go to a slow replica only once the fast ones have as long an expected wait', () => {
    const t = table([1, 1, 4]);
    let counter = 0;
    const order: string[] = [];
    for (let i = 0; i < 8; i++) {
      const d = decide(t, counter, { status: 'none' }, 8);
      assert.equal(d.kind, 'initialize');
      if (d.kind !== 'initialize') return;
      d.replica.load++;
      counter = (d.replica.index + 1) % t.length;
      order.push(d.replica.name);
    }
    // r0, r1 until each has 3 in flight (wait 4 = the idle slow replica's); then the tie rotates.
    assert.deepEqual(order, ['r0', 'r1', 'r0', 'r1', 'r0', 'r1', 'r2', 'r0']);
  });

  it('the slack is counted in requests of a median replica: a pin on a 4x slower replica holds at 1 in flight and moves at 2', () => {
    const t = table([1, 1, 4]);
    t[2].load = 1; // wait 8 <= 1 + 8
    assert.equal(decide(t, 0, { status: 'live', replica: t[2] }, 8).kind, 'retain');
    t[2].load = 2; // wait 12 > 9
    const d = decide(t, 0, { status: 'live', replica: t[2] }, 8);
    assert.equal(affinityHeader(d), 'switch;reason=overload');
    assert.equal(d.kind === 'switch' && d.replica.name, 'r0');
    // The same holds for a prefix match.
    assert.equal(affinityHeader(decide(t, 0, { status: 'prefix', replica: t[2] }, 8)), 'switch;reason=overload');
  });

  it('a fast pinned replica keeps its pin against an idle slow one as the plain slack rule says', () => {
    const t = table([1, 4]);
    t[0].load = 8;
    assert.equal(decide(t, 0, { status: 'live', replica: t[0] }, 8).kind, 'retain');
    t[0].load = 9;
    // The least expected wait is r1 (idle, wait 4): 10 <= 4 + 8 still holds.
    assert.equal(decide(t, 0, { status: 'live', replica: t[0] }, 8).kind, 'retain');
    t[0].load = 12; // 13 > 12
    assert.equal(affinityHeader(decide(t, 0, { status: 'live', replica: t[0] }, 8)), 'switch;reason=overload');
  });

  it('with a declared batch, one in flight costs 1/batch of a request: (1 + load / batch) × slowness', () => {
    assert.equal(expectedWait({ name: 'a', index: 0, routable: true, full: false, draining: false, load: 4, slowness: 4, batch: 8 }), 6);
    assert.equal(expectedWait({ name: 'a', index: 0, routable: true, full: false, draining: false, load: 0, slowness: 1, batch: 8 }), 1);
  });

  it('with a declared batch, new conversations reach a 4x slower replica only once the fast ones are full', () => {
    const t = table([1, 1, 4]).map((r) => ({ ...r, batch: 8 }));
    let counter = 0;
    const order: string[] = [];
    for (let i = 0; i < 17; i++) {
      const d = decide(t, counter, { status: 'none' }, 8);
      assert.equal(d.kind, 'initialize');
      if (d.kind !== 'initialize') return;
      d.replica.load++;
      d.replica.full = d.replica.load >= 8;
      counter = (d.replica.index + 1) % t.length;
      order.push(d.replica.name);
    }
    // Half full, a fast replica's wait is 1.5 against the idle slow one's 4: 16 go to r0 and r1.
    assert.deepEqual(order.slice(0, 16).sort(), [...Array<string>(8).fill('r0'), ...Array<string>(8).fill('r1')]);
    assert.equal(order[16], 'r2');
  });

  it('with a declared batch, a pin on the slow replica holds while it has room (its wait is at most 2 × slowness)', () => {
    const t = table([1, 1, 4]).map((r) => ({ ...r, batch: 8 }));
    t[2].load = 7; // wait 4 × 1.875 = 7.5 <= 1 + 8
    assert.equal(decide(t, 0, { status: 'live', replica: t[2] }, 8).kind, 'retain');
    t[2].full = true;
    assert.equal(affinityHeader(decide(t, 0, { status: 'live', replica: t[2] }, 8)), 'switch;reason=overload');
  });

  const arb = fc
    .array(fc.record({ routable: fc.boolean(), draining: fc.boolean(), full: fc.boolean(), load: fc.nat(20) }), { minLength: 1, maxLength: 8 })
    .map((rows) => rows.map((x, i): R => ({ ...x, routable: x.routable && !x.draining, name: `r${i}`, index: i })));

  it('property: slowness 1 everywhere decides exactly as no speed information (uniform fleet unchanged)', () => {
    fc.assert(
      fc.property(arb, fc.nat(20), fc.nat(10), fc.option(fc.nat(7)), fc.boolean(), (t, counter, slack, pinIdx, prefix) => {
        const withSpeed = t.map((r) => ({ ...r, slowness: 1 }));
        const pin = (tab: R[]): PinState<R> => {
          if (pinIdx === null) return { status: 'none' };
          const replica = tab[pinIdx % tab.length];
          return prefix ? { status: 'prefix', replica } : { status: 'live', replica };
        };
        const a = decide(t, counter, pin(t), slack);
        const b = decide(withSpeed, counter, pin(withSpeed), slack);
        assert.equal(affinityHeader(a), affinityHeader(b));
        assert.equal(a.kind === 'wait' || a.kind === 'none' ? '' : a.replica.name, b.kind === 'wait' || b.kind === 'none' ? '' : b.replica.name);
      }),
    );
  });

  it('property: the chosen replica has the least expected wait among the routable ones with room', () => {
    fc.assert(
      fc.property(arb, fc.array(fc.constantFrom(1, 0.5, 2, 4), { minLength: 8, maxLength: 8 }), fc.nat(20), (t, s, counter) => {
        t.forEach((r, i) => (r.slowness = s[i]));
        const d = decide(t, counter, { status: 'none' }, 8);
        const room = t.filter((r) => r.routable && !r.full);
        if (room.length === 0) return;
        assert.equal(d.kind, 'initialize');
        if (d.kind !== 'initialize') return;
        assert.equal(expectedWait(d.replica), Math.min(...room.map(expectedWait)));
      }),
    );
  });
});
