import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { simRequest, simStream, stopAllSims, type SimStream } from '../support/sim-process.js';
import { adminCall, TEST_TOKEN, waitFor, writeTempConfig } from '../support/router.js';
import { freePortRange, pidAlive, spawnRouter, type RouterProcess } from '../support/router-process.js';
import { simHost } from '../support/fleet.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

/**
 * The autoscaler (contract §6.1) against simulator replicas launched into slots, with short windows
 * (sub-second interval, a second or two up/down) so each case runs in seconds. The decision rules
 * themselves (hysteresis, bounds, back-off) are unit-tested in autoscale.policy.spec.ts.
 */
const ENV = { ROUTER_ADMIN_TOKEN: TEST_TOKEN };
const chat = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });
const FAST = ['--health-interval', '0.2', '--stop-grace', '2'];

interface ReplicaRow {
  name: string;
  kind: string;
  state: string;
  pid: number | null;
  ready: boolean;
}
const replicas = async (r: { url: string }): Promise<ReplicaRow[]> => (await adminCall(r, 'GET', '/replicas')).body.replicas as ReplicaRow[];
/** Launched replicas holding their slot and not on their way out. */
const live = (rows: ReplicaRow[]) => rows.filter((x) => x.kind !== 'static' && !['draining', 'stopping', 'failed'].includes(x.state));
const pool = async (r: { url: string }) => (await adminCall(r, 'GET', '/fleet')).body.autoscaler.pools[0] as Record<string, unknown>;

/** Samples GET /replicas until stopped: the largest number of launched replicas seen at once, and every pid. */
function watchPool(r: { url: string }): { stop(): Promise<{ most: number; pids: Set<number> }> } {
  let most = 0;
  let running = true;
  const pids = new Set<number>();
  const loop = (async () => {
    while (running) {
      const rows = await replicas(r).catch(() => []);
      most = Math.max(most, rows.filter((x) => x.kind !== 'static').length);
      for (const x of rows) if (x.pid !== null) pids.add(x.pid);
      await new Promise((done) => setTimeout(done, 50));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { most, pids };
    },
  };
}

/** True when `probe` held at every poll for `ms`; false at the first poll it did not. */
async function holds(probe: () => Promise<boolean>, ms: number): Promise<boolean> {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    if (!(await probe())) return false;
    await new Promise((done) => setTimeout(done, 50));
  }
  return true;
}

describe('autoscaling (contract §6.1)', () => {
  const procs: RouterProcess[] = [];
  const pidsSeen = new Set<number>();
  after(async () => {
    for (const p of procs) p.child.kill('SIGKILL');
    for (const pid of pidsSeen) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    await stopAllSims();
  });

  it('3 slots, min 1 max 3 target 2: six long streams grow the pool to 3; after them it shrinks to 1 draining the replicas with the fewest sessions first, a trickle all 200', async () => {
    const base = await freePortRange(3);
    const cfg = writeTempConfig({
      hosts: [simHost('g', [0, 1, 2], base, ['--itl-ms', '50'])],
      autoscale: { min: 1, max: 3, target_inflight: 2, interval: 0.2, up_after: 1, down_after: 1.5 },
    });
    const router = await spawnRouter(['--config', cfg, '--initial-replicas', '1', ...FAST], ENV);
    procs.push(router);
    const watch = watchPool(router);
    await waitFor(async () => (await replicas(router)).some((x) => x.ready), 15_000, 'the initial replica');
    assert.equal((await replicas(router)).length, 1, 'one replica at start (min 1)');

    const streams: SimStream[] = [];
    for (let i = 0; i < 6; i++) streams.push(await simStream(`${router.url}/v1/chat/completions`, { body: chat({ stream: true, max_tokens: 2_000 }) }));
    await Promise.all(streams.map((s) => s.waitForEvents(1)));
    const grown = await waitFor(async () => {
      const rows = live(await replicas(router));
      return rows.length === 3 && rows.every((x) => x.ready) ? rows : undefined;
    }, 30_000);
    assert.deepEqual(
      grown.map((x) => x.name),
      ['g-d0', 'g-d1', 'g-d2'],
    );
    const ups = router.logs().filter((l) => l['event'] === 'autoscale' && l['direction'] === 'up');
    assert.deepEqual(
      ups.map((l) => [l['reason'], l['load']]),
      [
        ['load_above_target', 6],
        ['load_above_target', 6],
      ],
    );
    // The pool's sizes are the autoscaler's view at its last tick, which may predate the third launch's readiness.
    await waitFor(
      async () => {
        const p = await pool(router);
        return p['desired'] === 3 && p['current'] === 3;
      },
      5_000,
      'the autoscaler to see desired 3, current 3',
    );

    // Sessions: three on g-d0, one on g-d1, none on g-d2. Scale-in takes g-d2, then g-d1.
    for (const [id, replica] of [
      ['a', 'g-d0'],
      ['b', 'g-d0'],
      ['c', 'g-d0'],
      ['d', 'g-d1'],
    ]) {
      assert.equal((await adminCall(router, 'PUT', `/sessions/${id}`, { body: { replica } })).status, 200);
    }
    for (const s of streams) s.destroy();

    const statuses: number[] = [];
    let trickling = true;
    const trickle = (async () => {
      for (let i = 0; trickling; i++) {
        // Session ids only: a request without one gets a new session, which would change the pin counts.
        const r = await simRequest(`${router.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'x-session-id': ['a', 'b', 'c', 'd'][i % 4] },
          body: Buffer.from(chat()),
        });
        statuses.push(r.status);
        await new Promise((done) => setTimeout(done, 100));
      }
    })();
    await waitFor(async () => (await replicas(router)).length === 1, 30_000, 'the pool to shrink to 1');
    const removed = router
      .logs()
      .filter((l) => l['event'] === 'autoscale_remove')
      .map((l) => [l['replica'], l['sessions']]);
    assert.deepEqual(removed, [
      ['g-d2', 0],
      ['g-d1', 1],
    ]);
    // Idle at min: it stays at 1 for several down_after windows.
    assert.equal(await holds(async () => (await replicas(router)).length === 1, 3_000), true, 'an idle pool stays at min');
    trickling = false;
    await trickle;
    assert.ok(statuses.length >= 10, `${statuses.length} trickle requests`);
    assert.deepEqual(
      statuses.filter((s) => s !== 200),
      [],
    );
    const { most, pids } = await watch.stop();
    for (const p of pids) pidsSeen.add(p);
    assert.ok(most <= 3, `at most 3 launched replicas at once (saw ${most})`);
    const p = await pool(router);
    assert.deepEqual([p['current'], p['desired'], p['direction']], [1, 1, 'hold']);
    router.child.kill('SIGTERM');
    assert.equal((await router.exited()).code, 0);
  });

  it('never exceeds max nor the free slots: 4 slots, max 3, --max-replicas 2 caps the pool at 2 (no_free_slot)', async () => {
    const base = await freePortRange(4);
    const cfg = writeTempConfig({
      hosts: [simHost('m', [0, 1, 2, 3], base, ['--itl-ms', '50'])],
      autoscale: { min: 1, max: 3, target_inflight: 1, interval: 0.2, up_after: 0.5, down_after: 30 },
    });
    const router = await spawnRouter(['--config', cfg, '--initial-replicas', '1', '--max-replicas', '2', ...FAST], ENV);
    procs.push(router);
    const watch = watchPool(router);
    await waitFor(async () => (await replicas(router)).some((x) => x.ready), 15_000, 'the initial replica');
    const streams: SimStream[] = [];
    for (let i = 0; i < 8; i++) streams.push(await simStream(`${router.url}/v1/chat/completions`, { body: chat({ stream: true, max_tokens: 2_000 }) }));
    const held = await waitFor(async () => {
      const p = await pool(router);
      return p['reason'] === 'no_free_slot' ? p : undefined;
    }, 20_000);
    assert.deepEqual([held['current'], held['desired']], [2, 3], 'wants max 3, holds at the 2 --max-replicas allows');
    // Several more up windows pass: still 2.
    assert.equal(await holds(async () => live(await replicas(router)).length === 2, 1_000), true);
    for (const s of streams) s.destroy();
    const { most, pids } = await watch.stop();
    for (const p of pids) pidsSeen.add(p);
    assert.equal(most, 2, `the pool reached and never passed 2 (saw ${most})`);
    router.child.kill('SIGTERM');
    assert.equal((await router.exited()).code, 0);
  });

  it('a launch that fails (bad command) is reported and retried with back-off, not in a loop', async () => {
    const base = await freePortRange(1);
    const cfg = writeTempConfig({
      hosts: [{ ...simHost('bad', [0], base), command: ['/nonexistent/engine', '--port', '{port}'] }],
      autoscale: { min: 1, interval: 0.1, up_after: 0.25, down_after: 30 },
    });
    const router = await spawnRouter(['--config', cfg, '--initial-replicas', '0', ...FAST], ENV);
    procs.push(router);
    const failed = () => router.logs().filter((l) => l['event'] === 'autoscale_launch_failed');
    await waitFor(() => failed().length >= 3, 15_000, 'three failed launches');
    // Back-off 0.25 s, 0.5 s, 1 s: 100 ms ticks would have tried ~8 times by the third failure.
    const at = failed().map((l) => Number(l['retry_in_ms']));
    assert.deepEqual(at.slice(0, 3), [250, 500, 1_000]);
    const p = await pool(router);
    assert.ok(Number(p['failures']) >= 3);
    assert.match(String((p['last_failure'] as { reason: string }).reason), /nonexistent\/engine/);
    assert.ok(['backoff', 'below_min'].includes(String(p['reason'])), String(p['reason']));
    const launches = router.logs().filter((l) => l['event'] === 'autoscale' && l['direction'] === 'up').length;
    // The log is read while the router runs: the last launch's failure may not be written yet.
    assert.ok([0, 1].includes(launches - failed().length), `one launch per failure, each after its back-off (${launches} launches)`);
    router.child.kill('SIGTERM');
    assert.equal((await router.exited()).code, 0);
  });

  it('SIGTERM during a scale-up launch: clean exit, no replica left running, state file empty', async () => {
    const base = await freePortRange(2);
    const state = join(tempDir('ar-as-up-'), 'state.json');
    const cfg = writeTempConfig({ hosts: [simHost('u', [0, 1], base, ['--startup-delay', '30'])], autoscale: { min: 2, interval: 0.1 } });
    const router = await spawnRouter(['--config', cfg, '--initial-replicas', '1', '--state-file', state, ...FAST], ENV);
    procs.push(router);
    const launch = await router.waitForLog((l) => l['event'] === 'launch' && l['replica'] === 'u-d1', 10_000);
    const first = router.logs().find((l) => l['event'] === 'launch' && l['replica'] === 'u-d0')!;
    const pids = [Number(first['pid']), Number(launch['pid'])];
    for (const p of pids) pidsSeen.add(p);
    assert.ok(router.logs().some((l) => l['event'] === 'autoscale' && l['reason'] === 'below_min' && l['direction'] === 'up'));
    assert.equal((await replicas(router)).find((x) => x.name === 'u-d1')?.state, 'launching', 'the scale-up is still loading');
    router.child.kill('SIGTERM');
    assert.equal((await router.exited()).code, 0);
    for (const p of pids) assert.equal(pidAlive(p), false, `replica pid ${p} survived`);
    assert.deepEqual(JSON.parse(readFileSync(state, 'utf8')).replicas, []);
  });

  it('PATCH /fleet/autoscaler pauses it (validated, audited); SIGTERM during the scale-in drain that follows its resumption: the streams finish, clean exit, no replica left running, state file empty', async () => {
    const base = await freePortRange(2);
    const state = join(tempDir('ar-as-down-'), 'state.json');
    const cfg = writeTempConfig({
      hosts: [simHost('d', [0, 1], base, ['--itl-ms', '50'])],
      autoscale: { min: 1, max: 2, target_inflight: 2, interval: 0.1, up_after: 30, down_after: 0.5 },
    });
    const router = await spawnRouter(['--config', cfg, '--initial-replicas', '2', '--state-file', state, ...FAST], ENV);
    procs.push(router);
    const paused = await adminCall(router, 'PATCH', '/fleet/autoscaler', { body: { paused: true } });
    assert.deepEqual([paused.status, paused.body.paused], [200, true]);
    assert.ok(router.logs().some((l) => l['event'] === 'audit' && l['what'] === 'autoscaler paused=true' && l['result'] === 'ok'));
    const bad = await adminCall(router, 'PATCH', '/fleet/autoscaler', { body: { paused: 'yes' } });
    assert.equal(bad.status, 400);
    assert.match(String(bad.headers['content-type']), /application\/problem\+json/);
    assert.match(String(bad.body.detail), /paused/);
    let seen: unknown;
    const rows = await waitFor(
      async () => {
        const r = await replicas(router);
        seen = r;
        return r.length === 2 && r.every((x) => x.ready) ? r : undefined;
      },
      15_000,
      () =>
        `both replicas ready; replicas ${JSON.stringify(seen)}; events ${JSON.stringify(
          router.logs().filter((l) => /launch|autoscale|replica|exit/.test(String(l['event']))),
        )}`,
    );
    const pids = rows.map((x) => x.pid!);
    for (const p of pids) pidsSeen.add(p);
    // Idle with two replicas and down_after 0.5 s: only the pause keeps both.
    assert.equal(await holds(async () => (await replicas(router)).length === 2, 1_000), true, 'nothing removed while paused');
    assert.equal((await adminCall(router, 'GET', '/fleet')).body.autoscaler.paused, true);
    // One 3 s stream on each replica (new sessions go to the least loaded): 2 in flight ≤ 2 × (2 − 1), so one replica goes.
    const streams = [];
    for (let i = 0; i < 2; i++) {
      const s = await simStream(`${router.url}/v1/chat/completions`, {
        headers: { 'x-session-id': `drain-${i}` },
        body: chat({ stream: true, max_tokens: 60 }),
      });
      await s.waitForEvents(1);
      streams.push(s);
    }
    const resumed = await adminCall(router, 'PATCH', '/fleet/autoscaler', { body: { paused: false } });
    assert.deepEqual([resumed.status, resumed.body.paused], [200, false]);
    const removal = await router.waitForLog((l) => l['event'] === 'autoscale_remove', 10_000);
    assert.equal(removal['outstanding'], 1, 'the replica being drained has a stream in flight');
    router.child.kill('SIGTERM');
    assert.deepEqual(await Promise.all(streams.map((s) => s.done)), ['end', 'end']);
    assert.equal((await router.exited()).code, 0);
    for (const p of pids) assert.equal(pidAlive(p), false, `replica pid ${p} survived`);
    assert.deepEqual(JSON.parse(readFileSync(state, 'utf8')).replicas, []);
  });
});
