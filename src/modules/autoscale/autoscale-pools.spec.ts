import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { HostSpec } from '../../config/router-config.js';
import { Replica, type ReplicaKind } from '../registry/replica.js';
import { createEndpoint } from '../registry/replica-endpoint.js';
import { launchHost, poolsOf, samplePool, scaleInChoice, type PoolFacts } from './autoscale-pools.js';

const host = (name: string, model?: string, served?: string): HostSpec =>
  ({ name, model, servedModelName: served, devices: [0], devicesPerReplica: 1 }) as unknown as HostSpec;

let port = 9000;
function replica(
  name: string,
  o: { kind?: ReplicaKind; host?: string; ready?: boolean; everReady?: boolean; pins?: number; load?: number; max?: number } = {},
) {
  const kind = o.kind ?? 'launched';
  const placement = kind === 'static' ? null : { slot: name, host: o.host ?? 'a', devices: [0], pid: 1, logPath: '/tmp/x', launchedAt: '' };
  const r = new Replica(name, kind, createEndpoint({ scheme: 'http', host: '127.0.0.1', port: port++ }), placement, {
    ready: o.ready ?? true,
    everReady: o.everReady ?? o.ready ?? true,
    maxInflight: o.max,
  });
  for (let i = 0; i < (o.pins ?? 0); i++) r.pinning.pinned();
  for (let i = 0; i < (o.load ?? 0); i++) r.occupy({ abort: () => undefined });
  return r;
}

const facts = (over: Partial<PoolFacts> = {}): PoolFacts => ({
  leaving: (r) => r.stopping,
  removable: () => true,
  freeSlots: [],
  hostOfSlot: (s) => s.split('-')[0],
  queued: 0,
  ...over,
});

describe('autoscale pools', () => {
  it('groups hosts by served_model_name, else model, else the host itself', () => {
    const pools = poolsOf([host('a', 'm1'), host('b', '/models/x', 'm1'), host('c', 'm2'), host('d')]);
    assert.deepEqual(
      pools.map((p) => [p.model, [...p.hosts]]),
      [
        ['m1', ['a', 'b']],
        ['m2', ['c']],
        ['host:d', ['d']],
      ],
    );
  });

  it('samples only launched and adopted members of its hosts; starting ones are capacity, cordoned and failed ones are gone', () => {
    const [pool] = poolsOf([host('a', 'm')]);
    const starting = replica('a-d1', { ready: false, everReady: false });
    const cordoned = replica('a-d2', { load: 9 });
    cordoned.drain(true);
    const failed = replica('a-d3', { ready: false, everReady: false });
    failed.markFailed();
    const table = [
      replica('a-d0', { load: 3 }),
      starting,
      cordoned,
      failed,
      replica('s', { kind: 'static', load: 50 }),
      replica('b-d0', { host: 'b', load: 7 }),
    ];
    const s = samplePool(pool, table, facts({ freeSlots: ['a-d4', 'b-d1'] }));
    assert.deepEqual(s, { routable: 1, starting: 1, current: 2, leaving: 0, load: 3, freeSlots: 1, removable: true });
  });

  it('adds the admission queue only when every routable member is full', () => {
    const [pool] = poolsOf([host('a', 'm')]);
    const full = [replica('a-d0', { load: 2, max: 2 }), replica('a-d1', { load: 2, max: 2 })];
    assert.equal(samplePool(pool, full, facts({ queued: 5 })).load, 9);
    const room = [replica('a-d0', { load: 2, max: 2 }), replica('a-d1', { load: 1, max: 2 })];
    assert.equal(samplePool(pool, room, facts({ queued: 5 })).load, 3);
  });

  it('scale-in takes the member with the fewest sessions, then the least loaded; never a starting or unremovable one', () => {
    const [pool] = poolsOf([host('a', 'm')]);
    const table = [
      replica('a-d0', { pins: 3 }),
      replica('a-d1', { pins: 1, load: 2 }),
      replica('a-d2', { pins: 1, load: 1 }),
      replica('a-d3', { ready: false, everReady: false }),
      replica('a-d4', { kind: 'adopted', pins: 0 }),
    ];
    assert.equal(scaleInChoice(pool, table, facts({ removable: (r) => r.name !== 'a-d4' }))?.name, 'a-d2');
    assert.equal(scaleInChoice(pool, table, facts())?.name, 'a-d4');
    assert.equal(scaleInChoice(pool, [table[3]], facts()), undefined, 'a starting replica is never chosen');
    assert.equal(samplePool(pool, [table[3]], facts()).removable, false);
  });

  it('launches on the first free slot of one of its hosts', () => {
    const [p1, p2] = poolsOf([host('a', 'm1'), host('b', 'm2')]);
    const f = facts({ freeSlots: ['a-d1', 'b-d0'] });
    assert.deepEqual([launchHost(p1, f), launchHost(p2, f), launchHost(p2, facts({ freeSlots: ['a-d1'] }))], ['a', 'b', undefined]);
  });
});
