import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { affinityHeader, decide } from './routing.policy.js';
import { table, type R } from './routing-table.fake.js';

describe('routing policy: prefix matches of session-less requests (contract §4.1)', () => {
  it('keeps a prefix match at slack 8 with 8 more in flight and moves it at 9 (switch;reason=overload)', () => {
    const t = table(3);
    t[2].load = 8;
    const kept = decide(t, 0, { status: 'prefix', replica: t[2] }, 8);
    assert.equal(kept.kind === 'prefix' && kept.replica, t[2]);
    assert.equal(affinityHeader(kept), 'prefix');
    t[2].load = 9;
    const moved = decide(t, 0, { status: 'prefix', replica: t[2] }, 8);
    assert.equal(affinityHeader(moved), 'switch;reason=overload');
    assert.equal(moved.kind === 'switch' && moved.replica, t[0]);
  });

  it('leaves a full or unroutable prefix holder for the least loaded', () => {
    const t = table(2);
    t[0].full = true;
    assert.equal(affinityHeader(decide(t, 0, { status: 'prefix', replica: t[0] }, 8)), 'switch;reason=overload');
    t[0].full = false;
    t[0].routable = false;
    const d = decide(t, 0, { status: 'prefix', replica: t[0] }, 8);
    assert.equal(affinityHeader(d), 'switch;reason=unhealthy');
    assert.equal(d.kind === 'switch' && d.replica, t[1]);
  });

  const arbTable = fc
    .array(fc.record({ routable: fc.boolean(), draining: fc.boolean(), full: fc.boolean(), load: fc.nat(20) }), { minLength: 1, maxLength: 8 })
    .map((rows) => rows.map((x, i): R => ({ ...x, routable: x.routable && !x.draining, name: `r${i}`, index: i })));

  it('property: a prefix holder that is routable, has room and is within slack is kept, else the least loaded with room wins', () => {
    fc.assert(
      fc.property(arbTable, fc.nat(20), fc.nat(10), fc.nat(7), (t, counter, slack, idx) => {
        const holder = t[idx % t.length];
        const d = decide(t, counter, { status: 'prefix', replica: holder }, slack);
        const room = t.filter((r) => r.routable && !r.full);
        if (room.length === 0) {
          assert.equal(d.kind, t.some((r) => r.routable) ? 'wait' : 'none');
          return;
        }
        const minLoad = Math.min(...room.map((r) => r.load));
        assert.ok(d.kind !== 'wait' && d.kind !== 'none' && d.kind !== 'retain' && d.kind !== 'initialize', d.kind);
        assert.equal(d.replica.routable && !d.replica.full, true);
        if (holder.routable && !holder.full && holder.load <= minLoad + slack) {
          assert.equal(d.kind === 'prefix' && d.replica, holder);
        } else {
          assert.equal(d.kind, 'switch');
          assert.equal(d.replica.load, minLoad);
          assert.equal(d.kind === 'switch' && d.reason, !holder.routable ? (holder.draining ? 'draining' : 'unhealthy') : 'overload');
        }
      }),
    );
  });
});
