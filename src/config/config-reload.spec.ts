/** What a reload changes, what it leaves for a restart, and the fleet lists it hands on. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planReload } from './config-reload.js';
import { loadRouterConfig } from './config.loader.js';
import type { RouterConfig } from './router-config.js';

const replica = (name: string, port: number, over: Record<string, unknown> = {}) => ({ name, host: '127.0.0.1', port, ...over });
const host = (devices: number[], over: Record<string, unknown> = {}) => ({ name: 'node', devices, model: '/models/m', port_base: 9000, ...over });

function load(file: unknown, argv: string[] = []): RouterConfig {
  return loadRouterConfig(['--config', 'router.json', ...argv], {}, { readFile: () => JSON.stringify(file) });
}

describe('planReload', () => {
  it('changes nothing for the same file', () => {
    const file = { replicas: [replica('a', 8001)], hosts: [host([0, 1])], routing: { affinity_slack: 2 } };
    const plan = planReload(load(file), load(file));
    assert.deepEqual(plan.changed, []);
    assert.deepEqual(plan.restartRequired, []);
    assert.deepEqual(plan.fields, {});
  });

  it('applies the affinity slack and session TTL, and names the routing settings built into tables at start', () => {
    const plan = planReload(
      load({ replicas: [replica('a', 8001)] }),
      load({ replicas: [replica('a', 8001)], routing: { affinity_slack: 0, session_ttl: 60, prefix_affinity: false } }),
    );
    assert.deepEqual(plan.changed, ['routing.affinity_slack', 'routing.session_ttl']);
    assert.deepEqual(plan.restartRequired, ['routing.prefix_affinity']);
    assert.equal(plan.fields.routing?.affinitySlack, 0);
    assert.equal(plan.fields.routing?.sessionTtlMs, 60_000);
    assert.equal(plan.fields.routing?.prefixAffinity, true, 'the running prefix affinity is kept');
  });

  it('names the listener, workers and Redis as needing a restart and leaves them out of the fields', () => {
    const plan = planReload(
      load({ replicas: [replica('a', 8001)] }),
      load({ replicas: [replica('a', 8001)], workers: 2 }, ['--port', '9999', '--redis-url', 'redis://x']),
    );
    assert.deepEqual(plan.restartRequired, ['--port', '--workers', '--redis-url', '--advertise-url'], 'the advertised URL follows the port');
    assert.deepEqual(plan.fields, {});
  });

  it('lists static replicas added, removed, and changed (drained, then added again)', () => {
    const plan = planReload(
      load({ replicas: [replica('a', 8001), replica('b', 8002), replica('c', 8003)] }),
      load({ replicas: [replica('a', 8001), replica('b', 8012), replica('d', 8004)] }),
    );
    assert.deepEqual(
      plan.addedReplicas.map((s) => s.name),
      ['d'],
    );
    assert.deepEqual(plan.removedReplicas, ['c']);
    assert.deepEqual(
      plan.replacedReplicas.map((s) => [s.name, s.port]),
      [['b', 8012]],
    );
    assert.deepEqual(plan.changed, ['replicas']);
  });

  it('lists slots a host gains and loses; a slot whose port moved is both', () => {
    const grow = planReload(load({ hosts: [host([0])] }), load({ hosts: [host([0, 1, 2])] }));
    assert.deepEqual(grow.addedSlots, ['node-d1', 'node-d2']);
    assert.deepEqual(grow.removedSlots, []);
    assert.deepEqual(grow.changed, ['--max-replicas', 'hosts']);
    const moved = planReload(load({ hosts: [host([0, 1])] }), load({ hosts: [host([0], { port_base: 9100 })] }));
    assert.deepEqual(moved.addedSlots, ['node-d0']);
    assert.deepEqual(moved.removedSlots, ['node-d0', 'node-d1']);
  });

  it('changes autoscale values live but not turning it on', () => {
    const on = planReload(load({ hosts: [host([0, 1])], autoscale: {} }), load({ hosts: [host([0, 1])], autoscale: { target_inflight: 9 } }));
    assert.deepEqual(on.changed, ['autoscale']);
    assert.equal(on.fields.autoscale?.targetInflight, 9);
    const off = planReload(load({ hosts: [host([0, 1])] }), load({ hosts: [host([0, 1])], autoscale: {} }));
    assert.deepEqual(off.restartRequired, ['autoscale']);
    assert.equal(off.fields.autoscale, undefined);
  });
});
