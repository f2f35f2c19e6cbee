import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createEndpoint } from './replica-endpoint.js';
import { Replica } from './replica.js';
import { RegistryService } from './registry.service.js';

const replica = (name: string, port: number): Replica =>
  new Replica(name, 'static', createEndpoint({ scheme: 'http', host: '127.0.0.1', port }), null, { ready: true });

describe('RegistryService', () => {
  it('reindexes on removal and refuses duplicate names', () => {
    const reg = new RegistryService();
    for (let i = 0; i < 4; i++) reg.add(replica(`r${i}`, 9000 + i));
    assert.throws(() => reg.add(replica('r1', 9999)), /already registered/);
    reg.remove('r1');
    assert.deepEqual(
      reg.list.map((r) => [r.name, r.index]),
      [
        ['r0', 0],
        ['r2', 1],
        ['r3', 2],
      ],
    );
    assert.throws(() => reg.remove('r1'), /no replica named 'r1'/);
    reg.onModuleDestroy();
  });

  it('property: after any add/remove sequence the live replicas hold distinct tiebreak slots 0..n-1', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.record({ add: fc.nat(20) }), fc.record({ remove: fc.nat(20) })), { maxLength: 60 }), (ops) => {
        const reg = new RegistryService();
        for (const op of ops) {
          if ('add' in op) {
            if (reg.get(`r${op.add}`) === undefined) reg.add(replica(`r${op.add}`, 10_000 + op.add));
          } else if (reg.get(`r${op.remove}`) !== undefined) {
            reg.remove(`r${op.remove}`);
          }
          const idx = reg.list.map((r) => r.index);
          assert.deepEqual(
            idx,
            idx.map((_, i) => i),
          );
          for (const r of reg.list) assert.equal(reg.get(r.name), r);
        }
        reg.onModuleDestroy();
      }),
      { numRuns: 300 },
    );
  });
});
