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

function problems(routing: Record<string, unknown>): string[] {
  try {
    load(routing);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems.map((p) => `${p.path}: ${p.message}`);
    throw e;
  }
  return [];
}

describe('config: prefix affinity settings (contract §4.1)', () => {
  it('is on by default with 1,000,000 blocks', () => {
    const c = load({});
    assert.equal(c.routing.prefixAffinity, true);
    assert.equal(c.routing.prefixBlocks, 1_000_000);
  });

  it('routing.prefix_affinity and routing.prefix_blocks set them; the env twin and the flag override the file', () => {
    const c = load({ prefix_affinity: false, prefix_blocks: 5000 });
    assert.equal(c.routing.prefixAffinity, false);
    assert.equal(c.routing.prefixBlocks, 5000);
    assert.equal(load({}, [], { ROUTER_PREFIX_AFFINITY: 'false' }).routing.prefixAffinity, false);
    assert.equal(load({ prefix_affinity: false }, ['--prefix-affinity']).routing.prefixAffinity, true);
    assert.equal(load({}, ['--prefix-blocks', '64']).routing.prefixBlocks, 64);
  });

  it('refuses a non-boolean switch and a block cap below 1, naming the path', () => {
    assert.deepEqual(
      problems({ prefix_affinity: 'yes' }).map((p) => p.split(':')[0]),
      ['routing.prefix_affinity'],
    );
    assert.deepEqual(
      problems({ prefix_blocks: 0 }).map((p) => p.split(':')[0]),
      ['routing.prefix_blocks'],
    );
  });
});
