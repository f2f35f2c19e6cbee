import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SlotSpec } from '../../config/router-config.js';
import { SlotTable } from './slot-table.js';

const slot = (name: string, host: string): SlotSpec => ({ name, host, devices: [0], port: 8001, address: '127.0.0.1', local: true });
const slots = [slot('local-d3', 'local'), slot('node02-d0', 'node02'), slot('node02-d1', 'node02')];

describe('SlotTable', () => {
  it('fills in order and never hands a slot out twice', () => {
    const t = new SlotTable(slots, 3);
    const got = [t.reserveNext('a'), t.reserveNext('b'), t.reserveNext('c')].map((r) => (r.ok ? r.slot.name : r.code));
    assert.deepEqual(got, ['local-d3', 'node02-d0', 'node02-d1']);
    const full = t.reserveNext('d');
    assert.equal(full.ok, false);
    assert.equal(!full.ok && full.code, 'pool_exhausted');
  });

  it('caps at the ceiling and lists only as many free slots as may be taken', () => {
    const t = new SlotTable(slots, 1);
    assert.deepEqual(t.capacity(), { owned: 0, ceiling: 1, free_slots: ['local-d3'] });
    assert.equal(t.reserveNext('a').ok, true);
    assert.deepEqual(t.capacity(), { owned: 1, ceiling: 1, free_slots: [] });
  });

  it('reserves on one host, and says so when that host is full', () => {
    const t = new SlotTable(slots, 3);
    const r = t.reserveNext('a', 'node02');
    assert.equal(r.ok && r.slot.name, 'node02-d0');
    t.reserveNext('b', 'node02');
    const none = t.reserveNext('c', 'node02');
    assert.equal(!none.ok && none.code, 'no_free_slot');
    assert.match(!none.ok ? none.message : '', /node02/);
  });

  it('frees a slot only for the holder that took it (a late double release cannot free a reused slot)', () => {
    const t = new SlotTable(slots, 3);
    t.reserveNext('first');
    assert.equal(t.release('local-d3', 'first'), true);
    t.reserveNext('second');
    assert.equal(t.release('local-d3', 'first'), false);
    assert.equal(t.holder('local-d3'), 'second');
    assert.equal(t.reserve('local-d3', 'third'), false);
    assert.equal(t.reserve('unknown', 'x'), false);
  });
});
