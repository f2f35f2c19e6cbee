import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { loadRouterConfig } from './config.loader.js';
import { ConfigError } from './config-error.js';
import type { RouterConfig } from './router-config.js';

const REPLICAS = { replicas: [{ name: 'r0', host: '127.0.0.1', port: 9001 }] };

function load(routing: Record<string, unknown>, argv: string[] = [], env: Record<string, string> = {}): RouterConfig {
  const text = JSON.stringify({ ...REPLICAS, routing });
  return loadRouterConfig(['--config', 'router.json', ...argv], env, { readFile: () => text });
}

describe('config: speed-aware load (contract §4.2)', () => {
  it('routing.speed_aware defaults to true; the file, its env twin and the flag set it', () => {
    assert.equal(load({}).routing.speedAware, true);
    assert.equal(load({ speed_aware: false }).routing.speedAware, false);
    assert.equal(load({}, [], { ROUTER_SPEED_AWARE: 'false' }).routing.speedAware, false);
    assert.equal(load({ speed_aware: false }, ['--speed-aware']).routing.speedAware, true);
  });

  it('routing.warm_handoff defaults to false; the file, its env twin and the flag set it', () => {
    assert.equal(load({}).routing.warmHandoff, false);
    assert.equal(load({ warm_handoff: true }).routing.warmHandoff, true);
    assert.equal(load({}, [], { ROUTER_WARM_HANDOFF: 'true' }).routing.warmHandoff, true);
    assert.equal(load({}, ['--warm-handoff']).routing.warmHandoff, true);
  });

  for (const key of ['speed_aware', 'warm_handoff']) {
    it(`refuses a routing.${key} that is not a boolean, naming it`, () => {
      try {
        load({ [key]: 'yes' });
        assert.fail('no error');
      } catch (e) {
        assert.ok(e instanceof ConfigError);
        assert.deepEqual(
          e.problems.map((p) => p.path),
          [`routing.${key}`],
        );
      }
    });
  }
});
