import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { DomainError } from '../../common/errors/domain-error.js';
import { fleetRig } from './fleet-rig.fake.js';

/**
 * Leadership moving between routers (issue 26), on the fleet's units with a recording transport:
 * losing the lease keeps the replicas routable as `shared`, taking it adopts them in place, and a
 * launch never starts a replica onto a port another server holds.
 */
describe('fleet hand-over', { timeout: 10_000 }, () => {
  it('losing the lease keeps every replica in the table as shared, with its health and pins; adopting takes the same object back', async (t) => {
    const rig = await fleetRig(t);
    const r = await rig.launchOne();
    r.health.setReady(true); // health's promotion, as HealthService.setReady does it
    rig.fleet.relinquish();
    assert.equal(rig.registry.get(r.name), r, 'the same replica object stays in the table');
    assert.deepEqual([r.kind, r.routable, r.removed], ['shared', true, false]);
    assert.equal(rig.fleet.launchedCount, 0, 'no longer owned');
    assert.deepEqual(rig.released, [], 'no pin released');
    assert.deepEqual(rig.fleet.capacity().free_slots, [rig.slot.name]);

    const [entry] = rig.fleet.sharedEntries();
    assert.deepEqual([entry.slot, entry.port, entry.pid], [r.name, r.endpoint.port, r.placement?.pid]);
    const adopted = rig.fleet.registerAdopted(rig.slot, entry, true, entry.pid);
    assert.equal(adopted, r, 'adopted in place');
    assert.deepEqual([r.kind, r.routable, rig.fleet.launchedCount], ['adopted', true, 1]);
    assert.equal(rig.registry.list.length, 1);
    assert.equal(rig.fleet.capacity().free_slots.length, 0);
  });

  it('never launches onto a port that already answers; the slot is kept for that server and freed once the port closes', async (t) => {
    const rig = await fleetRig(t);
    const squatter = createServer((s) => s.destroy());
    await new Promise<void>((done) => squatter.listen(rig.slot.port, rig.slot.address, done));
    t.after(() => squatter.close());
    await assert.rejects(rig.launchOne(), (e: unknown) => e instanceof DomainError && e.code === 'launch_failed' && /already in use/.test(e.message));
    assert.equal(rig.transport.launches.length, 0, 'nothing was started');
    assert.equal(rig.registry.list.length, 0);
    assert.deepEqual(
      rig.fleet.orphans.map((o) => o.slot),
      [rig.slot.name],
    );
    await rig.launcher.checkLaunching();
    assert.deepEqual(rig.fleet.capacity().free_slots, [], 'kept while the port answers');
    await new Promise<void>((done) => squatter.close(() => done()));
    await rig.launcher.checkLaunching();
    assert.deepEqual(rig.fleet.capacity().free_slots, [rig.slot.name], 'free once nothing answers');
    await rig.launchOne();
    assert.equal(rig.transport.launches.length, 1);
  });

  it('a launch that lost its port to another server (its process gone, the port answering) frees its slot, kept for that server', async (t) => {
    const rig = await fleetRig(t, { launchTimeoutMs: 0, transport: 'ssh' });
    const r = await rig.launchOne();
    const other = createHttpServer((_req, res) => res.end('{}'));
    await new Promise<void>((done) => other.listen(rig.slot.port, rig.slot.address, done));
    t.after(() => other.close());
    rig.transport.gone.add(r.placement!.pid!);
    await rig.launcher.checkLaunching();
    assert.equal(rig.fleet.launchedCount, 0, 'the failed launch holds no record');
    assert.match(rig.fleet.orphans.at(-1)?.reason ?? '', /another server answers/);
    await new Promise<void>((done) => other.close(() => done()));
    await rig.launcher.checkLaunching();
    assert.deepEqual(rig.fleet.capacity().free_slots, [rig.slot.name], 'free once the other server is gone');
  });
});
