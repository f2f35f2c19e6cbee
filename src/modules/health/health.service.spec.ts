import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { Writable } from 'node:stream';
import { createAppLogger } from '../../common/logging/logger.js';
import type { HealthSettings, RouterConfig } from '../../config/router-config.js';
import { RegistryService } from '../registry/registry.service.js';
import { createEndpoint } from '../registry/replica-endpoint.js';
import { Replica } from '../registry/replica.js';
import { HealthService } from './health.service.js';
import { FakeReplicaHealth } from './replica-health.fake.js';
import { HealthMetrics } from './health.metrics.js';
import { MetricsRegistry } from '../../common/metrics/metrics-registry.js';

/**
 * HealthService against a fake replica /health, one `tick()` at a time: no poller and no sleeps,
 * so each probe result is applied in a known order. `intervalMs: 0` means no probe spread.
 */
async function setup(t: TestContext, health: Partial<HealthSettings>, initial: { ready: boolean } = { ready: true }) {
  const settings: HealthSettings = { path: '/health', intervalMs: 0, timeoutMs: 2_000, fall: 2, rise: 2, metricsIntervalMs: 0, ...health };
  const fake = await FakeReplicaHealth.start();
  const registry = new RegistryService();
  t.after(async () => {
    registry.onModuleDestroy();
    await fake.close();
  });
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const config = { health: settings, redisUrl: undefined } as unknown as RouterConfig;
  const svc = new HealthService(config, registry, createAppLogger('info', 'json', sink), new HealthMetrics(new MetricsRegistry()));
  const transitions: boolean[] = [];
  svc.onTransition((_r, ready) => transitions.push(ready));
  const endpoint = createEndpoint({ scheme: 'http', host: '127.0.0.1', port: fake.port });
  // An existing server that is not ready yet is `unready` (everReady), as health sees it after a fall.
  const replica = registry.add(new Replica('r0', 'static', endpoint, null, { ready: initial.ready, everReady: true }));
  /** `n` ticks, each answered with the next status of `answers` (cycled). */
  const ticks = async (answers: number[], n = answers.length): Promise<void> => {
    for (let i = 0; i < n; i++) {
      fake.answer = answers[i % answers.length];
      await svc.tick();
    }
  };
  return { svc, fake, registry, replica, transitions, logs, ticks };
}

describe('HealthService fall/rise', () => {
  it('demotes a ready replica on the fall-th consecutive failed probe, not before, and says why once', async (t) => {
    const s = await setup(t, { fall: 3 });
    await s.ticks([503], 2);
    assert.deepEqual([s.replica.ready, s.replica.health.failures, s.transitions], [true, 2, []]);
    await s.ticks([503]);
    assert.deepEqual([s.replica.ready, s.transitions], [false, [false]]);
    await s.ticks([503], 2);
    assert.deepEqual(s.transitions, [false], 'one transition, not one per failed probe');
    const unready = s.logs.filter((l) => l['event'] === 'unready');
    assert.deepEqual(
      unready.map((l) => [l['replica'], l['reason']]),
      [['r0', 'status 503']],
    );
    assert.equal(s.replica.lastHealth?.status, 503);
  });

  it('promotes an unready replica on the rise-th consecutive good probe; a failure in between starts the count again', async (t) => {
    const s = await setup(t, { rise: 3 }, { ready: false });
    await s.ticks([200, 200, 503, 200, 200]);
    assert.deepEqual([s.replica.ready, s.replica.health.successes, s.transitions], [false, 2, []]);
    await s.ticks([200]);
    assert.deepEqual([s.replica.ready, s.transitions], [true, [true]]);
    assert.equal(s.replica.state, 'ready');
  });

  it('never changes state on results that alternate good and bad with fall = rise = 2', async (t) => {
    const up = await setup(t, { fall: 2, rise: 2 }, { ready: true });
    await up.ticks([503, 200], 8);
    assert.deepEqual([up.replica.ready, up.transitions], [true, []]);
    const down = await setup(t, { fall: 2, rise: 2 }, { ready: false });
    await down.ticks([200, 503], 8);
    assert.deepEqual([down.replica.ready, down.transitions], [false, []]);
  });

  it('counts a probe with no answer within the timeout as a failure', async (t) => {
    const s = await setup(t, { fall: 1, timeoutMs: 50 });
    s.fake.answer = 'hold';
    await s.svc.tick();
    assert.equal(s.replica.ready, false);
    assert.match(s.replica.lastHealth?.error ?? '', /no answer within 50 ms/);
  });

  it('does not probe a replica again while its last probe is out, nor one being stopped', async (t) => {
    const s = await setup(t, { fall: 1 });
    s.fake.answer = 'hold';
    const slow = s.svc.tick();
    await s.fake.whenWaiting(1);
    // The next interval's tick comes while the first probe is still out (a probe longer than the interval).
    await s.svc.tick();
    assert.equal(s.fake.probes, 1, 'no second probe of the same replica');
    s.fake.release(200);
    await slow;
    assert.equal(s.replica.ready, true);
    s.replica.beginStop();
    s.fake.answer = 503;
    await s.svc.tick();
    assert.deepEqual([s.fake.probes, s.replica.ready], [1, true], 'a replica being stopped is not probed');
  });

  it('applies nothing when the answer comes after the replica left the table', async (t) => {
    const s = await setup(t, { fall: 1 });
    s.fake.answer = 'hold';
    const pending = s.svc.check(s.replica);
    await s.fake.whenWaiting(1);
    s.registry.remove('r0');
    s.fake.release(503);
    await pending;
    assert.deepEqual([s.replica.ready, s.replica.health.failures, s.transitions], [true, 0, []]);
  });

  it('demotes at once on a refused connection in the data plane, whatever fall is; rise good probes bring it back', async (t) => {
    const s = await setup(t, { fall: 3, rise: 2 });
    s.svc.connectFailed(s.replica, 'connect ECONNREFUSED', 'ECONNREFUSED');
    assert.deepEqual([s.replica.ready, s.transitions], [false, [false]]);
    assert.match(String(s.logs.find((l) => l['event'] === 'unready')?.['reason']), /^connect failed: connect ECONNREFUSED/);
    await s.ticks([200]);
    assert.equal(s.replica.ready, false);
    await s.ticks([200]);
    assert.deepEqual([s.replica.ready, s.transitions], [true, [false, true]]);
  });

  it("counts the data plane's 5xx and failed probes toward the same fall", async (t) => {
    const s = await setup(t, { fall: 3 });
    s.svc.upstreamFailed(s.replica, 'status 500');
    s.svc.upstreamFailed(s.replica, 'status 500');
    assert.equal(s.replica.ready, true);
    await s.ticks([503]);
    assert.deepEqual([s.replica.ready, s.transitions], [false, [false]]);
  });
});
