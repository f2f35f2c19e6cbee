/** `--body-memory` (contract §3): parsed like a size, defaulted from the heap limit, never below `--max-body`. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { getHeapStatistics } from 'node:v8';
import { ConfigError } from './config-error.js';
import { loadRouterConfig } from './config.loader.js';

const readFile = (): string => JSON.stringify({ replicas: [{ host: '127.0.0.1', port: 8001 }] });
const load = (argv: string[], env: Record<string, string> = {}) => loadRouterConfig(['--config', 'r.json', ...argv], env, { readFile });

describe('--body-memory', () => {
  it('takes a size with a suffix, from the flag or ROUTER_BODY_MEMORY', () => {
    assert.equal(load(['--body-memory', '256MiB']).bodyMemoryBytes, 256 * 1024 * 1024);
    assert.equal(load([], { ROUTER_BODY_MEMORY: '1GiB' }).bodyMemoryBytes, 1024 ** 3);
  });

  it('defaults to a quarter of the heap limit, and never below --max-body', () => {
    const quarter = Math.floor(getHeapStatistics().heap_size_limit / 4);
    assert.equal(load([]).bodyMemoryBytes, Math.max(quarter, 64 * 1024 * 1024));
    assert.equal(load(['--max-body', `${quarter + 10}`]).bodyMemoryBytes, quarter + 10);
  });

  it('refuses a budget below --max-body, or that is not a size, naming the flag and the reason', () => {
    for (const [argv, pattern] of [
      [['--body-memory', '1MiB'], /less than --max-body \(67108864 bytes\): a body of the largest accepted size could never be held/],
      [['--body-memory', 'lots'], /must be a size >= 1 in bytes/],
      [['--body-memory', '0'], /must be a size >= 1 in bytes/],
    ] as const) {
      try {
        load([...argv]);
        assert.fail(`accepted ${argv.join(' ')}`);
      } catch (e) {
        assert.ok(e instanceof ConfigError, String(e));
        assert.equal(e.problems[0].path, '--body-memory');
        assert.match(e.problems[0].message, pattern);
      }
    }
  });
});
