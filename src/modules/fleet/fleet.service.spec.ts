import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { DomainError } from '../../common/errors/domain-error.js';
import { fleetRig, inFlight } from './fleet-rig.fake.js';

/** A few turns of the event loop: time for anything already due to happen (nothing here waits on a timer). */
async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await nextTurn();
}

/**
 * The drain (contract §6) with a recording transport and requests counted as the proxy counts them:
 * a drain waits on the replica's "in flight reached 0" event (`Replica.whenIdle()`), so ending the
 * requests is what lets it go on; `--drain-timeout` 0 makes the deadline the first thing to happen.
 */
describe('FleetService drain', { timeout: 10_000 }, () => {
  it('takes a replica out of rotation at once and stops it only when its last request ended', async (t) => {
    const rig = await fleetRig(t);
    const r = await rig.launchOne();
    const [a, b] = [inFlight(r), inFlight(r)];
    const { rec, done } = rig.fleet.remove(r.name);
    assert.deepEqual([r.draining, r.routable, rig.fleet.drainStatus(rec).state], [true, false, 'draining']);
    assert.deepEqual(rig.released, [r], 'its pins are released at once');
    await turns();
    assert.equal(rig.transport.stops.length, 0, 'not stopped while two requests run');
    a.end();
    await turns();
    assert.equal(rig.transport.stops.length, 0, 'not stopped while one request runs');
    b.end();
    await done;
    assert.deepEqual(
      rig.transport.stops.map((s) => s.pid),
      [r.placement?.pid],
    );
    assert.deepEqual([a.aborted, b.aborted], [[], []], 'nothing was cut');
    assert.deepEqual([r.removed, rig.fleet.drainStatus(rec).state, rig.book.stats.stops], [true, 'stopped', 1]);
    assert.deepEqual(rig.fleet.capacity().free_slots, [rig.slot.name]);
    assert.deepEqual(rig.book.failures, [], 'an exit the fleet asked for is not a failure');
  });

  it('stops an idle replica without waiting', async (t) => {
    const rig = await fleetRig(t);
    const r = await rig.launchOne();
    await rig.fleet.remove(r.name).done;
    assert.deepEqual([r.removed, rig.transport.stops.length], [true, 1]);
  });

  it('cuts what is still in flight at --drain-timeout, then stops the replica', async (t) => {
    const rig = await fleetRig(t, { drainTimeoutMs: 0 });
    const r = await rig.launchOne();
    const stuck = inFlight(r);
    await rig.fleet.remove(r.name).done;
    assert.equal(stuck.aborted.length, 1);
    assert.match(stuck.aborted[0], /drain timed out/);
    assert.deepEqual(
      rig.logs.filter((l) => l['event'] === 'drain_timeout').map((l) => [l['replica'], l['outstanding']]),
      [[r.name, 1]],
    );
    assert.equal(rig.transport.stops.length, 1);
  });

  it('joins a second removal to the running drain: one drain, one stop', async (t) => {
    const rig = await fleetRig(t);
    const r = await rig.launchOne();
    const req = inFlight(r);
    const first = rig.fleet.remove(r.name);
    const second = rig.fleet.remove(r.name);
    assert.equal(second.done, first.done);
    assert.throws(
      () => rig.fleet.setDraining(r.name, false),
      (e: unknown) => e instanceof DomainError && e.code === 'replica_not_routable',
    );
    req.end();
    await Promise.all([first.done, second.done]);
    assert.equal(rig.transport.stops.length, 1);
    assert.equal(rig.logs.filter((l) => l['event'] === 'drain').length, 1);
  });

  it('a drain that begins while the launch is still spawning (a shutdown during a scale-up) stops the process once its pid is known', async (t) => {
    const rig = await fleetRig(t);
    let spawned!: () => void;
    const gate = new Promise<void>((done) => (spawned = done));
    const launch = rig.transport.launch.bind(rig.transport);
    rig.transport.launch = async (spec) => {
      await gate;
      return launch(spec);
    };
    const launching = rig.launcher.launch(1, undefined);
    await turns();
    const stopping = rig.fleet.stopAll(performance.now() + 10_000);
    await turns();
    assert.equal(rig.transport.stops.length, 0, 'no pid to signal yet');
    spawned();
    const [r] = await launching;
    await stopping;
    assert.deepEqual(
      rig.transport.stops.map((s) => s.pid),
      [r.placement?.pid],
    );
    assert.deepEqual(
      rig.logs.filter((l) => l['event'] === 'stop_skipped'),
      [],
    );
    assert.deepEqual([r.removed, rig.fleet.capacity().free_slots], [true, [rig.slot.name]]);
  });

  it('a drain that begins while a launch is spawning and the launch then fails has nothing to stop', async (t) => {
    const rig = await fleetRig(t);
    let fail!: (e: Error) => void;
    rig.transport.launch = () => new Promise((_resolve, reject) => (fail = reject));
    const launching = rig.launcher.launch(1, undefined).then(
      () => 'launched',
      (e: Error) => e.message,
    );
    await turns();
    const stopping = rig.fleet.stopAll(performance.now() + 10_000);
    fail(new Error('no such program'));
    assert.match(await launching, /launch failed: no such program/);
    await stopping;
    assert.deepEqual([rig.transport.stops.length, rig.logs.filter((l) => l['event'] === 'stop_skipped').length], [0, 0]);
    assert.deepEqual(rig.fleet.capacity().free_slots, [rig.slot.name]);
  });
});
