import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fleetRig } from './fleet-rig.fake.js';

/**
 * The launch watch (contract §6) with a recording transport: `checkLaunching()` is called directly,
 * as the launch-check job would, so timing is set by `--launch-timeout` (0: every check is past it;
 * 60 s: none is), never by sleeping.
 */
describe('ReplicaLauncher launch timeout and early exits', { timeout: 10_000 }, () => {
  it('fails a launch not ready within --launch-timeout: reported with its log tail, stopped, its slot freed', async (t) => {
    const rig = await fleetRig(t, { launchTimeoutMs: 0 });
    const r = await rig.launchOne();
    assert.equal(r.state, 'launching');
    await rig.launcher.checkLaunching();
    assert.equal(rig.book.stats.launchTimeouts, 1);
    assert.deepEqual(
      rig.book.failures.map((f) => [f.name, f.reason, f.log_tail]),
      [[r.name, 'not ready within --launch-timeout 0 s', rig.transport.logTail]],
    );
    assert.deepEqual(
      rig.transport.stops.map((s) => s.pid),
      [r.placement?.pid],
      'stopped through its transport',
    );
    assert.equal(rig.registry.get(r.name), undefined);
    assert.deepEqual(rig.fleet.capacity().free_slots, [rig.slot.name]);
    await rig.launcher.checkLaunching();
    assert.equal(rig.book.stats.launchTimeouts, 1, 'reported once');
  });

  it('leaves a launch alone inside its --launch-timeout, and one that has been ready once', async (t) => {
    const patient = await fleetRig(t, { launchTimeoutMs: 60_000 });
    const waiting = await patient.launchOne();
    await patient.launcher.checkLaunching();
    assert.deepEqual([waiting.state, patient.transport.stops.length, patient.book.failures.length], ['launching', 0, 0]);

    const strict = await fleetRig(t, { launchTimeoutMs: 0 });
    const served = await strict.launchOne();
    served.health.setReady(true); // health's promotion, as HealthService.setReady does it
    await strict.launcher.checkLaunching();
    assert.deepEqual([served.state, strict.transport.stops.length, strict.book.stats.launchTimeouts], ['ready', 0, 0]);
  });

  it('fails an ssh launch whose remote process is gone before it was ready as an exit, once when two checks overlap', async (t) => {
    const rig = await fleetRig(t, { transport: 'ssh' });
    const r = await rig.launchOne();
    rig.transport.gone.add(r.placement?.pid ?? -1);
    // A liveness probe that outlasts the check interval: the next check starts before it answered.
    await Promise.all([rig.launcher.checkLaunching(), rig.launcher.checkLaunching()]);
    assert.deepEqual([rig.book.stats.exits, rig.book.stats.launchTimeouts], [1, 0]);
    assert.deepEqual(
      rig.book.failures.map((f) => f.reason),
      ['remote process is gone before becoming ready'],
    );
    assert.equal(rig.transport.stops.length, 1);
  });

  it('counts a local process that exits before it was ready once, even when a launch check fails it at the same time', async (t) => {
    const rig = await fleetRig(t, { launchTimeoutMs: 0 });
    const r = await rig.launchOne();
    // The exit is seen first, the check runs before its report is done: one failure, not two.
    rig.transport.exit(r.placement?.pid ?? -1, { code: 1, signal: null });
    await rig.launcher.checkLaunching();
    assert.equal(rig.book.stats.exits + rig.book.stats.launchTimeouts, 1, `exits ${rig.book.stats.exits}, timeouts ${rig.book.stats.launchTimeouts}`);
    assert.equal(rig.book.failures.length, 1);
  });

  it('reports a local process that exits before it was ready with how it ended', async (t) => {
    const rig = await fleetRig(t);
    const r = await rig.launchOne();
    const stopped = new Promise((resolve) => rig.registry.onRemoved(resolve));
    rig.transport.exit(r.placement?.pid ?? -1, { code: 3, signal: null });
    await stopped;
    assert.deepEqual(
      rig.book.failures.map((f) => f.reason),
      ['process exited with code 3 before becoming ready'],
    );
    assert.deepEqual([rig.book.stats.exits, r.state, rig.registry.get(r.name)], [1, 'failed', undefined]);
  });
});
