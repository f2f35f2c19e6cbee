import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SessionDirectory, type PinTarget } from './session-directory.js';

const target = (name: string): PinTarget => ({ name, pinEpoch: 0, pins: 0 });

describe('SessionDirectory', () => {
  it('pins, looks up and unpins', () => {
    const d = new SessionDirectory<PinTarget>(60_000, 10);
    const r = target('r0');
    d.pin('s', r, 0);
    const l = d.lookup('s', 1);
    assert.equal(l.status, 'live');
    assert.equal(r.pins, 1);
    assert.equal(d.unpin('s', 2), true);
    assert.equal(d.lookup('s', 3).status, 'none');
    assert.equal(r.pins, 0);
  });

  it('is alive at ttl-1 s and expired at ttl+1 s; pinning refreshes', () => {
    const d = new SessionDirectory<PinTarget>(60_000, 10);
    const r = target('r0');
    d.pin('s', r, 0);
    assert.equal(d.lookup('s', 59_000).status, 'live');
    assert.equal(d.lookup('s', 61_000).status, 'expired');
    d.pin('s', r, 61_000);
    assert.equal(d.lookup('s', 120_000).status, 'live');
  });

  it('sweep drops only expired pins and counts them as TTL evictions', () => {
    const d = new SessionDirectory<PinTarget>(10, 10);
    const r = target('r0');
    d.pin('old', r, 0);
    d.pin('new', r, 15);
    assert.equal(d.sweep(20), 1);
    assert.equal(d.lookup('old', 20).status, 'none');
    assert.equal(d.lookup('new', 20).status, 'live');
    assert.equal(d.evictedTtl, 1);
    assert.equal(d.size, 1);
  });

  it('at cap 3, refreshing s0 then adding s3 evicts s1 (LRU)', () => {
    const d = new SessionDirectory<PinTarget>(1_000_000, 3);
    const r = target('r0');
    d.pin('s0', r, 0);
    d.pin('s1', r, 1);
    d.pin('s2', r, 2);
    d.pin('s0', r, 3);
    d.pin('s3', r, 4);
    assert.equal(d.lookup('s1', 5).status, 'none');
    for (const s of ['s0', 's2', 's3']) assert.equal(d.lookup(s, 5).status, 'live');
    assert.equal(d.evictedLru, 1);
    assert.equal(r.pins, 3);
  });

  it('evicts expired pins before live ones when over the cap', () => {
    const d = new SessionDirectory<PinTarget>(10, 2);
    const r = target('r0');
    d.pin('a', r, 0);
    d.pin('b', r, 50);
    d.pin('c', r, 55);
    assert.equal(d.evictedTtl, 1);
    assert.equal(d.evictedLru, 0);
    assert.equal(d.lookup('b', 56).status, 'live');
  });

  it('releasing a target makes its pins read as released in O(1), and keeps counts right', () => {
    const d = new SessionDirectory<PinTarget>(1_000_000, 100);
    const a = target('a');
    const b = target('b');
    for (let i = 0; i < 5; i++) d.pin(`s${i}`, a, i);
    d.pin('other', b, 9);
    d.release(a);
    assert.equal(a.pins, 0);
    assert.equal(d.size, 1);
    assert.equal(d.lookup('s0', 10).status, 'released');
    d.pin('s0', b, 11);
    assert.equal(b.pins, 2);
    assert.equal(d.size, 2);
    assert.equal(d.lookup('s0', 12).status, 'live');
    d.sweep(13);
    assert.equal(d.size, 2);
  });

  it('refuses a non-positive ttl or cap', () => {
    assert.throws(() => new SessionDirectory<PinTarget>(0, 1), /ttl/);
    assert.throws(() => new SessionDirectory<PinTarget>(1, 0), /max sessions/);
  });
});
