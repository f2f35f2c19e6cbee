import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SessionDirectory, type PinTarget } from './session-directory.js';
import { ReplicaPins } from '../registry/replica-pins.js';

const target = (name: string): PinTarget => ({ name, pinning: new ReplicaPins() });

/** What a writer taking the changes now would see: the changed ids (sorted) and released target names. */
function taken(d: SessionDirectory<PinTarget>): { ids: string[]; released: string[]; overflowed: boolean } {
  const t = d.changes!.take();
  return { ids: [...t.ids].sort(), released: [...t.released].map((r) => r.name), overflowed: t.overflowed };
}

describe('SessionDirectory change tracking (the state file journal)', () => {
  it('tracks nothing until asked to', () => {
    const d = new SessionDirectory<PinTarget>(60_000, 10);
    d.pin('s', target('a'), 0);
    assert.equal(d.changes, undefined);
  });

  it('a new pin, a move and a re-pin after release are changes; a touch or a re-pin to the same replica is not', () => {
    const d = new SessionDirectory<PinTarget>(60_000, 10);
    const changes = d.trackChanges(100);
    const a = target('a');
    const b = target('b');
    d.pin('new', a, 0);
    d.pin('moved', a, 0);
    assert.deepEqual(taken(d), { ids: ['moved', 'new'], released: [], overflowed: false });
    assert.equal(changes.pending, false);
    d.touch('new', 1);
    d.pin('new', a, 2);
    assert.equal(changes.pending, false, 'using a pin changes nothing the file records');
    d.pin('moved', b, 3);
    assert.deepEqual(taken(d), { ids: ['moved'], released: [], overflowed: false });
  });

  it('unpin, LRU eviction and the TTL sweep reach the writer as changed ids', () => {
    const d = new SessionDirectory<PinTarget>(10, 2);
    d.trackChanges(100);
    const a = target('a');
    d.pin('x', a, 0);
    d.pin('y', a, 0);
    taken(d);
    assert.equal(d.unpin('y', 1), true);
    assert.deepEqual(taken(d).ids, ['y']);
    d.pin('z', a, 5);
    d.pin('w', a, 6); // over the cap of 2: x, the least recently used, is evicted
    assert.equal(d.lookup('x', 6).status, 'none');
    assert.deepEqual(taken(d).ids, ['w', 'x', 'z']);
    assert.equal(d.sweep(16), 1); // z expired (last used at 5, ttl 10)
    assert.deepEqual(taken(d).ids, ['z']);
  });

  it('release records the replica once (not every id); an id pinned to it again afterwards is a change of its own', () => {
    const d = new SessionDirectory<PinTarget>(60_000, 100);
    d.trackChanges(100);
    const a = target('a');
    for (let i = 0; i < 10; i++) d.pin(`s${i}`, a, 0);
    taken(d);
    d.release(a);
    d.pin('s3', a, 1);
    assert.deepEqual(taken(d), { ids: ['s3'], released: ['a'], overflowed: false });
    d.release(target('empty'));
    assert.equal(d.changes!.pending, false, 'releasing a replica without pins changes nothing');
    // The released entries are dropped as they reach the head: nothing new to record.
    for (let i = 0; i < 100; i++) d.pin(`t${i}`, a, 2);
    assert.ok(!taken(d).ids.some((id) => id.startsWith('s') && id !== 's3'), 'dropping released entries records nothing');
  });

  it('past its limit drops the ids and asks for a full snapshot instead', () => {
    const d = new SessionDirectory<PinTarget>(60_000, 100);
    d.trackChanges(5);
    const a = target('a');
    for (let i = 0; i < 6; i++) d.pin(`s${i}`, a, 0);
    assert.deepEqual(taken(d), { ids: [], released: [], overflowed: true });
    d.pin('after', a, 1);
    assert.deepEqual(taken(d), { ids: ['after'], released: [], overflowed: false });
  });
});
