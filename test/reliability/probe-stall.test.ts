/**
 * A stalled router must not demote a healthy replica (production-shaped bench, issue 13): with the
 * router's event loop starved, all four replicas failed their probes at the same instant
 * ("no answer within 2000 ms") while they answered their own polls in < 2 s. A probe's deadline
 * counts the time the router could run, so an answer that arrived during a stall is read.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSim, stopAllSims } from '../support/sim-process.js';
import { createEndpoint, destroyEndpoint } from '../../src/modules/registry/replica-endpoint.js';
import { probe } from '../../src/modules/health/probe.js';

/** Keep this process's event loop busy for `ms` (a CPU-starved or GC-paused router). */
function stall(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // spin
  }
}

describe('health probe deadline (contract §5)', () => {
  after(stopAllSims);

  it('reads the answer of a replica that replied while the router was stalled past the timeout', async () => {
    const sim = await spawnSim({ name: 'healthy' });
    const ep = createEndpoint({ scheme: 'http', host: '127.0.0.1', port: sim.port });
    try {
      // Three probes in a row, each stalled 2.5x its 1 s timeout right after it was sent.
      for (let i = 0; i < 3; i++) {
        const pending = probe(ep, '/health', 1_000);
        stall(2_500);
        const res = await pending;
        assert.equal(res.ok, true, `probe ${i}: ${JSON.stringify(res)}`);
      }
    } finally {
      destroyEndpoint(ep);
    }
  });

  it('still times out a replica that does not answer, within four times the timeout however stalled', async () => {
    const sim = await spawnSim({ name: 'hung' });
    const ep = createEndpoint({ scheme: 'http', host: '127.0.0.1', port: sim.port });
    sim.child.kill('SIGSTOP'); // the kernel accepts the connection; nothing answers
    try {
      const t0 = performance.now();
      const res = await probe(ep, '/health', 500);
      assert.equal(res.ok, false);
      assert.equal(res.code, 'ETIMEDOUT');
      assert.ok(performance.now() - t0 >= 450, 'timed out before its deadline');
    } finally {
      sim.child.kill('SIGCONT');
      destroyEndpoint(ep);
    }
  });
});
