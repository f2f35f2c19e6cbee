/** The `autoscale` section (contract §6.1): defaults, units, and each rule with its path. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, type ConfigProblem } from './config-error.js';
import { loadRouterConfig } from './config.loader.js';
import type { RouterConfig } from './router-config.js';

const host = (devices: number[], over: Record<string, unknown> = {}) => ({ name: 'node', devices, model: '/models/m', ...over });

function load(file: unknown, argv: string[] = []): RouterConfig {
  return loadRouterConfig(['--config', 'router.json', ...argv], {}, { readFile: () => JSON.stringify(file) });
}

function problems(file: unknown, argv: string[] = []): ConfigProblem[] {
  try {
    load(file, argv);
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  assert.fail('expected a ConfigError');
}

describe('config file: autoscale', () => {
  it('is off without the section', () => {
    assert.equal(load({ hosts: [host([0, 1])] }).autoscale, undefined);
  });

  it("fills contract §6.1's defaults, max being the slot capacity, durations in ms", () => {
    assert.deepEqual(load({ hosts: [host([0, 1, 2, 3], { devices_per_replica: 2 }), host([0], { name: 'b', port_base: 9001 })], autoscale: {} }).autoscale, {
      min: 1,
      max: 3,
      targetInflight: 8,
      intervalMs: 10_000,
      upAfterMs: 30_000,
      downAfterMs: 300_000,
    });
    const s = load({ hosts: [host([0, 1, 2])], autoscale: { min: 2, max: 3, target_inflight: 1.5, interval: 0.2, up_after: 1, down_after: 2.5 } }).autoscale;
    assert.deepEqual(s, { min: 2, max: 3, targetInflight: 1.5, intervalMs: 200, upAfterMs: 1_000, downAfterMs: 2_500 });
  });

  it('keeps max above --max-replicas (that bound applies at run time)', () => {
    assert.equal(load({ hosts: [host([0, 1, 2])], autoscale: { max: 3 } }, ['--max-replicas', '2']).autoscale?.max, 3);
  });

  it('names each wrong field by its path', () => {
    const found = problems({
      hosts: [host([0, 1])],
      autoscale: { min: 0, max: 1.5, target_inflight: 0, interval: -1, up_after: '30', down_after: null, extra: 1 },
    });
    assert.deepEqual(
      found.map((p) => `${p.path}: ${p.message}`),
      [
        'autoscale.extra: unknown field (allowed here: min, max, target_inflight, interval, up_after, down_after)',
        'autoscale.min: must be an integer >= 1, got 0',
        'autoscale.max: must be an integer >= 1, got 1.5',
        'autoscale.target_inflight: must be a number > 0, got 0',
        'autoscale.interval: must be a number of seconds > 0, got -1',
        'autoscale.up_after: must be a number of seconds > 0, got "30"',
      ],
    );
    assert.deepEqual(
      problems({ hosts: [host([0])], autoscale: [] }).map((p) => `${p.path}: ${p.message}`),
      ['autoscale: must be an object, got []'],
    );
  });

  it('refuses max past the declared slots, min past max, and a section without hosts', () => {
    assert.deepEqual(
      problems({ hosts: [host([0, 1])], autoscale: { max: 3 } }).map((p) => `${p.path}: ${p.message}`),
      ['autoscale.max: 3 exceeds the 2 declared device slots'],
    );
    assert.deepEqual(
      problems({ hosts: [host([0, 1, 2])], autoscale: { min: 3, max: 2 } }).map((p) => `${p.path}: ${p.message}`),
      ['autoscale.min: 3 exceeds autoscale.max 2'],
    );
    assert.deepEqual(
      problems({ hosts: [host([0, 1])], autoscale: { min: 3 } }).map((p) => `${p.path}: ${p.message}`),
      ['autoscale.min: 3 exceeds the 2 declared device slots (the default of autoscale.max)'],
    );
    assert.deepEqual(
      problems({ replicas: [{ host: '127.0.0.1', port: 8001 }], autoscale: {} }).map((p) => `${p.path}: ${p.message}`),
      ['autoscale: needs at least one entry in "hosts" to launch replicas on (the config declares none)'],
    );
  });
});
