import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { affinityHeader, decide, type PinState } from './routing.policy.js';
import { table, type R } from './routing-table.fake.js';

/** Applies decisions like RoutingService does, for sequence tests. */
function routeMany(t: R[], sessions: string[], slack = 8): string[] {
  const pins = new Map<string, R>();
  let counter = 0;
  return sessions.map((s) => {
    const p = pins.get(s);
    const d = decide(t, counter, p ? { status: 'live', replica: p } : { status: 'none' }, slack);
    assert.notEqual(d.kind, 'none');
    if (d.kind === 'none' || d.kind === 'wait') return '';
    pins.set(s, d.replica);
    if (d.kind !== 'retain') counter = (d.replica.index + 1) % t.length;
    return d.replica.name;
  });
}

describe('routing policy: candidates by model (contract §4.3)', () => {
  const odd = (r: R): boolean => r.index % 2 === 1;

  it('chooses only among the candidates, the rotation keeping the whole table', () => {
    const t = table(4);
    const d = decide(t, 0, { status: 'none' }, 8, odd);
    assert.deepEqual([d.kind, d.kind === 'initialize' ? d.replica.name : ''], ['initialize', 'r1']);
    const next = decide(t, 2, { status: 'none' }, 8, odd);
    assert.equal(next.kind === 'initialize' ? next.replica.name : '', 'r3');
  });

  it('moves a pin that does not serve the model (switch;reason=model), keeps one that does', () => {
    const t = table(4);
    const moved = decide(t, 0, { status: 'live', replica: t[0] }, 8, odd);
    assert.equal(affinityHeader(moved), 'switch;reason=model');
    assert.equal(decide(t, 0, { status: 'prefix', replica: t[2] }, 8, odd).kind, 'switch');
    assert.equal(decide(t, 0, { status: 'live', replica: t[3] }, 8, odd).kind, 'retain');
  });

  it('waits only for a full candidate, and has none when no candidate is routable', () => {
    const t = table(3);
    t[1].full = true;
    assert.equal(decide(t, 0, { status: 'none' }, 8, odd).kind, 'wait');
    t[1].routable = false;
    assert.equal(decide(t, 0, { status: 'none' }, 8, odd).kind, 'none');
  });
});

describe('routing policy', () => {
  it('sends new sessions on an idle fleet r0, r1, r2, r0 ...', () => {
    assert.deepEqual(routeMany(table(3), ['a', 'b', 'c', 'd']), ['r0', 'r1', 'r2', 'r0']);
  });

  it('keeps a session on its replica (5 repeats, 5 retains)', () => {
    const t = table(3);
    assert.deepEqual(routeMany(t, ['a', 'a', 'a', 'a', 'a']), ['r0', 'r0', 'r0', 'r0', 'r0']);
  });

  it('keeps a pin at slack 8 with 8 more in flight and moves it at 9', () => {
    const t = table(2);
    t[0].load = 8;
    assert.equal(decide(t, 0, { status: 'live', replica: t[0] }, 8).kind, 'retain');
    t[0].load = 9;
    const d = decide(t, 0, { status: 'live', replica: t[0] }, 8);
    assert.deepEqual([d.kind, d.kind === 'switch' ? d.reason : ''], ['switch', 'overload']);
  });

  it('with slack 0, one more in flight moves the pin', () => {
    const t = table(2);
    t[0].load = 1;
    assert.equal(decide(t, 0, { status: 'live', replica: t[0] }, 0).kind, 'switch');
  });

  it('re-routes an unroutable pin with the right reason', () => {
    const t = table(2);
    t[0].routable = false;
    const d = decide(t, 0, { status: 'live', replica: t[0] }, 8);
    assert.equal(d.kind === 'switch' && d.reason, 'unhealthy');
    t[0].draining = true;
    const d2 = decide(t, 0, { status: 'live', replica: t[0] }, 8);
    assert.equal(d2.kind === 'switch' && d2.reason, 'draining');
    assert.equal(d2.kind === 'switch' && d2.replica.name, 'r1');
  });

  it('reports expired and released pins', () => {
    const t = table(2);
    const e = decide(t, 0, { status: 'expired', replica: t[0] }, 8);
    assert.equal(e.kind === 'switch' && e.reason, 'expired');
    const r = decide(t, 0, { status: 'released', replica: t[0], reason: 'removed' }, 8);
    assert.equal(r.kind === 'switch' && r.reason, 'removed');
  });

  it('answers none when nothing is routable', () => {
    const t = table(2);
    for (const r of t) r.routable = false;
    assert.equal(decide(t, 0, { status: 'none' }, 8).kind, 'none');
  });

  it('answers wait when every routable replica is full, and none when the only room is on unroutable ones', () => {
    const t = table(3);
    for (const r of t) r.full = true;
    assert.equal(decide(t, 0, { status: 'none' }, 8).kind, 'wait');
    assert.equal(decide(t, 0, { status: 'live', replica: t[1] }, 8).kind, 'wait');
    for (const r of t) r.routable = false;
    t[0].full = false;
    assert.equal(decide(t, 0, { status: 'none' }, 8).kind, 'none');
  });

  it('moves a pin off a full replica to one with room, whatever the slack', () => {
    const t = table(2);
    t[0].full = true;
    t[0].load = 2;
    t[1].load = 5;
    const d = decide(t, 0, { status: 'live', replica: t[0] }, 8);
    assert.deepEqual([d.kind, d.kind === 'switch' ? d.reason : '', d.kind === 'switch' ? d.replica.name : ''], ['switch', 'overload', 'r1']);
    // A new session skips the full replica too, even though it carries the least load.
    const n = decide(t, 0, { status: 'none' }, 8);
    assert.equal(n.kind === 'initialize' && n.replica.name, 'r1');
  });

  const arbTable = fc
    .array(fc.record({ routable: fc.boolean(), draining: fc.boolean(), full: fc.boolean(), load: fc.nat(20) }), { minLength: 1, maxLength: 8 })
    .map((rows) => rows.map((x, i): R => ({ ...x, routable: x.routable && !x.draining, name: `r${i}`, index: i })));

  it('property: never picks a non-routable or full replica; waits only when every routable one is full', () => {
    fc.assert(
      fc.property(arbTable, fc.nat(20), fc.nat(10), fc.option(fc.nat(7)), (t, counter, slack, pinIdx) => {
        const pinned = pinIdx === null ? undefined : t[pinIdx % t.length];
        const pin: PinState<R> = pinned ? { status: 'live', replica: pinned } : { status: 'none' };
        const d = decide(t, counter, pin, slack);
        if (t.some((r) => r.routable && !r.full)) {
          assert.ok(d.kind !== 'none' && d.kind !== 'wait', d.kind);
          assert.equal(d.replica.routable, true);
          assert.equal(d.replica.full, false);
        } else if (t.some((r) => r.routable)) {
          assert.equal(d.kind, 'wait');
        } else {
          assert.equal(d.kind, 'none');
        }
      }),
    );
  });

  it('property: a pinned routable replica within slack is always kept', () => {
    fc.assert(
      fc.property(arbTable, fc.nat(20), fc.nat(10), fc.nat(7), (t, counter, slack, pinIdx) => {
        const pinned = t[pinIdx % t.length];
        fc.pre(pinned.routable && !pinned.full);
        // The least load over the routable replicas with room, computed here rather than by the
        // policy's own leastOutstanding(), so a wrong minimum there cannot hide a wrong decision.
        const minLoad = Math.min(...t.filter((r) => r.routable && !r.full).map((r) => r.load));
        const d = decide(t, counter, { status: 'live', replica: pinned }, slack);
        if (pinned.load <= minLoad + slack) {
          assert.equal(d.kind === 'retain' && d.replica, pinned);
        } else {
          assert.equal(d.kind === 'switch' && d.reason, 'overload');
          // It moves to a routable replica carrying the least load.
          assert.equal(d.kind === 'switch' && d.replica.routable, true);
          assert.equal(d.kind === 'switch' && d.replica.load, minLoad);
        }
      }),
    );
  });

  it('property: new sessions spread evenly over an idle fleet', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 5 }), (n, rounds) => {
        const names = routeMany(
          table(n),
          Array.from({ length: n * rounds }, (_, i) => `s${i}`),
        );
        const counts = new Map<string, number>();
        for (const x of names) counts.set(x, (counts.get(x) ?? 0) + 1);
        for (let i = 0; i < n; i++) assert.equal(counts.get(`r${i}`), rounds);
      }),
    );
  });
});
