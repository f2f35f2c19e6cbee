import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSim, simRequest, simStream, stopAllSims } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { freePortRange, pidAlive } from '../support/router-process.js';
import { fleetEvents, replicaState, simHost } from '../support/fleet.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

const TOKEN_ENV = { ROUTER_ADMIN_TOKEN: TEST_TOKEN };

const chat = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });
const post = (router: TestRouter, session?: string) =>
  simRequest(`${router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(session ? { 'x-session-id': session } : {}) },
    body: Buffer.from(chat()),
  });
const pidOf = async (router: TestRouter, name: string): Promise<number> =>
  (await adminCall(router, 'GET', '/replicas')).body.replicas.find((r: { name: string }) => r.name === name).pid;

describe('fleet (contract §6)', () => {
  const routers: TestRouter[] = [];
  const start = async (config: unknown, flags: string[] = []) => {
    const r = await startTestRouter(config, flags, TOKEN_ENV);
    routers.push(r);
    return r;
  };
  after(async () => {
    for (const r of routers) await r.close().catch(() => undefined);
    await stopAllSims();
  });

  it('launches --initial-replicas, routes nothing to them until healthy, then to both; argv carries the device group', async () => {
    const base = await freePortRange(4);
    // Loading takes 4 s: long enough that the two calls below land before it even on a loaded runner.
    const router = await start({ hosts: [simHost('h', [0, 1, 2, 3], base, ['--startup-delay', '4'], { devices_per_replica: 2 })] }, [
      '--initial-replicas',
      '2',
    ]);
    const list = await adminCall(router, 'GET', '/replicas');
    assert.deepEqual(
      list.body.replicas.map((r: { name: string; state: string; kind: string }) => [r.name, r.state, r.kind]),
      [
        ['h-d0', 'launching', 'launched'],
        ['h-d2', 'launching', 'launched'],
      ],
    );
    assert.deepEqual(
      list.body.replicas.map((r: { url: string }) => r.url),
      [`http://127.0.0.1:${base}`, `http://127.0.0.1:${base + 2}`],
    );
    const early = await post(router, 'early');
    assert.equal(early.status, 503);
    await waitFor(
      async () => (await adminCall(router, 'GET', '/replicas')).body.replicas.every((r: { ready: boolean }) => r.ready),
      30_000,
      'both replicas ready',
    );
    const names = new Set<string>();
    for (let i = 0; i < 4; i++) names.add(String((await post(router, `s${i}`)).headers['x-replica-name']));
    assert.deepEqual([...names].sort(), ['h-d0', 'h-d2']);
    const stats = (await simRequest(`http://127.0.0.1:${base}/__sim/stats`)).body.toString();
    assert.equal(JSON.parse(stats).devices, '0,1');
  });

  it('routes nothing to a launched simulator that listens but fails its health checks, until it passes them', async () => {
    const base = await freePortRange(1);
    const router = await start({ hosts: [simHost('u', [0], base, ['--fault-health', 'not_ready'])] }, ['--initial-replicas', '1']);
    const sim = `http://127.0.0.1:${base}`;
    await waitFor(async () => (await simRequest(`${sim}/__sim/stats`).catch(() => undefined))?.status === 200, 10_000, 'the simulator to listen');
    // Listening, and probed twice by the router with 503 not_ready: still not promoted.
    const probed = async () =>
      (await adminCall(router, 'GET', '/replicas')).body.replicas[0] as { state: string; last_health: { status?: number; at: string } | null };
    const first = await waitFor(
      async () => ((await probed()).last_health?.status === 503 ? (await probed()).last_health!.at : undefined),
      5_000,
      'a failed health probe',
    );
    const second = await waitFor(
      async () => {
        const r = await probed();
        return r.last_health?.status === 503 && r.last_health.at !== first ? r : undefined;
      },
      5_000,
      'a second failed health probe',
    );
    assert.equal(second.state, 'launching');
    assert.equal(await replicaState(router, 'u-d0'), 'launching');
    const early = await post(router, 'early');
    assert.equal(early.status, 503);
    assert.equal(JSON.parse((await simRequest(`${sim}/__sim/stats`)).body.toString()).requests, 0, 'nothing reached the unhealthy replica');
    await simRequest(`${sim}/__sim/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ health: 'ok' }) });
    await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas[0].ready, 5_000, 'promotion once healthy');
    assert.equal(await replicaState(router, 'u-d0'), 'ready');
    const now = await post(router, 'now');
    assert.equal(now.status, 200);
    assert.equal(now.headers['x-replica-name'], 'u-d0');
    assert.equal(JSON.parse((await simRequest(`${sim}/__sim/stats`)).body.toString()).requests, 1);
  });

  it('makes four 2-device slots of devices 0..7 (h-d0,h-d2,h-d4,h-d6 on port_base+0,2,4,6) and launches the first with --devices 0,1', async () => {
    const base = await freePortRange(8);
    const router = await start({ hosts: [simHost('h', [0, 1, 2, 3, 4, 5, 6, 7], base, [], { devices_per_replica: 2 })] }, ['--initial-replicas', '0']);
    const fleet = (await adminCall(router, 'GET', '/fleet')).body;
    assert.deepEqual(
      fleet.slots.map((x: { name: string; port: number; devices: number[]; state: string }) => [x.name, x.port, x.devices, x.state]),
      [
        ['h-d0', base, [0, 1], 'free'],
        ['h-d2', base + 2, [2, 3], 'free'],
        ['h-d4', base + 4, [4, 5], 'free'],
        ['h-d6', base + 6, [6, 7], 'free'],
      ],
    );
    assert.deepEqual(fleet.capacity, { owned: 0, ceiling: 4, free_slots: ['h-d0', 'h-d2', 'h-d4', 'h-d6'] });
    const launched = await adminCall(router, 'POST', '/replicas');
    assert.equal(launched.status, 202);
    assert.equal(launched.body.name, 'h-d0');
    assert.equal(launched.body.url, `http://127.0.0.1:${base}`);
    await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas[0]?.ready, 10_000, 'h-d0 ready');
    const stats = JSON.parse((await simRequest(`http://127.0.0.1:${base}/__sim/stats`)).body.toString()) as { devices: string; port: number };
    assert.equal(stats.devices, '0,1');
    assert.equal(stats.port, base);
    const after = (await adminCall(router, 'GET', '/fleet')).body;
    assert.deepEqual(after.slots[0], { name: 'h-d0', host: 'h', devices: [0, 1], port: base, state: 'reserved', replica: 'h-d0' });
    assert.deepEqual(after.capacity.free_slots, ['h-d2', 'h-d4', 'h-d6']);
  });

  it('gives 20 concurrent launches exactly the 3 free slots; the rest get 409 with the capacity', async () => {
    const base = await freePortRange(3);
    const router = await start({ hosts: [simHost('c', [0, 1, 2], base)] }, ['--initial-replicas', '0']);
    const answers = await Promise.all(Array.from({ length: 20 }, () => adminCall(router, 'POST', '/replicas')));
    const ok = answers.filter((a) => a.status === 202);
    const refused = answers.filter((a) => a.status === 409);
    assert.equal(ok.length, 3);
    assert.equal(refused.length, 17);
    assert.deepEqual(ok.map((a) => a.body.name).sort(), ['c-d0', 'c-d1', 'c-d2']);
    for (const r of refused) {
      assert.match(String(r.headers['content-type']), /application\/problem\+json/);
      assert.match(r.body.message, /slot|ceiling/);
      assert.equal(r.body.detail, r.body.message);
      assert.deepEqual(r.body.capacity, { owned: 3, ceiling: 3, free_slots: [] });
    }
  });

  it('refuses a launch past --max-replicas with 409', async () => {
    const base = await freePortRange(3);
    const router = await start({ hosts: [simHost('m', [0, 1, 2], base)] }, ['--initial-replicas', '0', '--max-replicas', '1']);
    assert.equal((await adminCall(router, 'POST', '/replicas')).status, 202);
    const second = await adminCall(router, 'POST', '/replicas');
    assert.equal(second.status, 409);
    assert.equal(second.body.capacity.ceiling, 1);
    assert.equal((await adminCall(router, 'POST', '/replicas', { body: { host: 'nope' } })).status, 404);
  });

  it('answers 502 when the launch command cannot start, frees the slot and counts a launch_failure', async () => {
    const base = await freePortRange(1);
    const host = { ...simHost('x', [0], base), command: ['/nonexistent/serve-binary', '--port', '{port}'] };
    const router = await start({ hosts: [host] }, ['--initial-replicas', '0']);
    const r = await adminCall(router, 'POST', '/replicas');
    assert.equal(r.status, 502);
    assert.match(r.body.detail, /serve-binary/);
    assert.deepEqual(r.body.capacity.free_slots, ['x-d0']);
    assert.deepEqual(await fleetEvents(router), { launch: 0, stop: 0, adoption: 0, launch_failure: 1, launch_timeout: 0, exit: 0 });
    await router.waitForLog((l) => l['event'] === 'launch_failed' && l['replica'] === 'x-d0');
  });

  it('stops a replica not ready within --launch-timeout, frees its slot and reports the log path and tail', async () => {
    const base = await freePortRange(1);
    const router = await start({ hosts: [simHost('t', [0], base, ['--startup-delay', '60', '--show-startup-logs'])] }, [
      '--initial-replicas',
      '1',
      '--launch-timeout',
      '1',
    ]);
    const pid = await pidOf(router, 't-d0');
    assert.ok(pidAlive(pid));
    const fleet = await waitFor(
      async () => {
        const f = await adminCall(router, 'GET', '/fleet');
        return f.body.failures.length > 0 && f.body.slots[0].state === 'free' ? f.body : undefined;
      },
      15_000,
      'the launch timeout',
    );
    assert.match(fleet.failures[0].reason, /launch-timeout/);
    assert.match(fleet.failures[0].log_path, /t-d0\.log$/);
    assert.ok(fleet.failures[0].log_tail.length > 0, 'log tail reported');
    assert.deepEqual(fleet.capacity.free_slots, ['t-d0']);
    await waitFor(() => !pidAlive(pid), 5_000, 'the process to be gone');
    assert.equal((await adminCall(router, 'GET', '/replicas')).body.replicas.length, 0);
    const line = await router.waitForLog((l) => l['event'] === 'replica_failed' && l['replica'] === 't-d0');
    assert.equal(line['log_path'], fleet.failures[0].log_path);
    assert.match(String(line['log_path']), /t-d0\.log$/);
    assert.ok(Array.isArray(line['log_tail']) && line['log_tail'].length > 0, 'the log line carries the log tail');
    assert.ok(
      (line['log_tail'] as string[]).some((l) => l.trim() !== ''),
      'the tail has the replica output',
    );
    assert.match(String(line['reason']), /launch-timeout/);
    await waitFor(async () => (await fleetEvents(router)).stop === 1, 5_000, 'the stop to be counted');
    assert.deepEqual(await fleetEvents(router), { launch: 1, stop: 1, adoption: 0, launch_failure: 0, launch_timeout: 1, exit: 0 });
    assert.equal(await replicaState(router, 't-d0'), undefined, 'no state series for a stopped replica');
  });

  it('drains on DELETE: a 3 s stream completes, its sessions re-route, nothing new goes to it, its process is gone', async () => {
    const base = await freePortRange(2);
    const router = await start({ hosts: [simHost('d', [0, 1], base, ['--itl-ms', '100'])] }, ['--initial-replicas', '2']);
    await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas.every((r: { ready: boolean }) => r.ready), 10_000, 'ready');
    const s = await simStream(`${router.url}/v1/chat/completions`, { headers: { 'x-session-id': 'long' }, body: chat({ stream: true, max_tokens: 30 }) });
    const victim = String(s.headers['x-replica-name']);
    const other = victim === 'd-d0' ? 'd-d1' : 'd-d0';
    const pid = await pidOf(router, victim);
    await s.waitForEvents(2);
    const del = adminCall(router, 'DELETE', `/replicas/${victim}`);
    await waitFor(
      async () => (await adminCall(router, 'GET', '/replicas')).body.replicas.find((r: { name: string }) => r.name === victim)?.draining,
      10_000,
      'draining',
    );
    assert.equal(await replicaState(router, victim), 'draining');
    assert.equal(await replicaState(router, other), 'ready');
    const drainLine = await router.waitForLog((l) => l['event'] === 'drain' && l['replica'] === victim);
    assert.equal(drainLine['outstanding'], 1);
    const next = await post(router, 'long');
    assert.equal(next.headers['x-replica-name'], other);
    for (let i = 0; i < 4; i++) assert.equal((await post(router, `new-${i}`)).headers['x-replica-name'], other);
    assert.equal(await s.done, 'end');
    // Intact: 30 token chunks in order, the finish chunk, then [DONE]; nothing lost or doubled.
    assert.equal(s.events.length, 32);
    assert.equal(s.events.at(-1)?.data, '[DONE]');
    const chunks = s.events.slice(0, -1).map((e) => JSON.parse(e.data) as { choices: Array<{ delta: { content?: string }; finish_reason: string | null }> });
    assert.equal(chunks.filter((c) => (c.choices[0]?.delta.content ?? '') !== '').length, 30);
    assert.deepEqual(
      chunks.map((c) => c.choices[0]?.finish_reason ?? null).filter((f) => f !== null),
      ['length'],
    );
    const answer = await del;
    assert.equal(answer.status, 200);
    assert.equal(answer.body.stopped, true);
    assert.equal(answer.body.name, victim);
    await waitFor(() => !pidAlive(pid), 5_000, 'the process to be gone');
    assert.deepEqual(await fleetEvents(router), { launch: 2, stop: 1, adoption: 0, launch_failure: 0, launch_timeout: 0, exit: 0 });
    assert.equal(await replicaState(router, victim), undefined);
    await router.waitForLog((l) => l['event'] === 'stop' && l['replica'] === victim && l['pid'] === pid);
  });

  it('cuts a stream still running at --drain-timeout with the error event', async () => {
    const base = await freePortRange(1);
    const router = await start({ hosts: [simHost('k', [0], base, ['--itl-ms', '100'])] }, ['--initial-replicas', '1', '--drain-timeout', '1']);
    await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas[0]?.ready, 10_000, 'ready');
    const s = await simStream(`${router.url}/v1/chat/completions`, { body: chat({ stream: true, max_tokens: 100 }) });
    await s.waitForEvents(1);
    const t0 = performance.now();
    const del = adminCall(router, 'DELETE', '/replicas/k-d0');
    await s.done;
    const took = performance.now() - t0;
    // at the 1 s drain timeout: not before, and well before the stream's own end (100 chunks, 10 s)
    assert.ok(took > 800 && took < 5_000, `cut after ${took} ms`);
    const last = JSON.parse(s.events.at(-1)!.data) as { error?: { code: string } };
    assert.equal(last.error?.code, 'replica_disconnected');
    assert.equal(
      s.events.some((e) => e.data === '[DONE]'),
      false,
    );
    assert.equal((await del).status, 200);
  });

  it('joins a second DELETE to the running drain (one stop), answers ?wait=false with 202 at once', async () => {
    const base = await freePortRange(1);
    const router = await start({ hosts: [simHost('j', [0], base, ['--itl-ms', '100'])] }, ['--initial-replicas', '1']);
    await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas[0]?.ready, 10_000, 'ready');
    // 20 chunks, 100 ms apart: in flight for ~2 s, through the three DELETEs below
    const s = await simStream(`${router.url}/v1/chat/completions`, { body: chat({ stream: true, max_tokens: 20 }) });
    await s.waitForEvents(1);
    const quick = await adminCall(router, 'DELETE', '/replicas/j-d0?wait=false');
    // at once: answered while the stream it drains is still in flight (outstanding 1)
    assert.equal(quick.status, 202);
    assert.equal(quick.body.state, 'draining');
    assert.equal(quick.body.outstanding, 1);
    assert.ok(quick.body.drain_deadline);
    const [a, b] = await Promise.all([adminCall(router, 'DELETE', '/replicas/j-d0'), adminCall(router, 'DELETE', '/replicas/j-d0')]);
    assert.deepEqual([a.status, b.status], [200, 200]);
    assert.equal(await s.done, 'end');
    assert.equal(router.logs().filter((l) => l['event'] === 'stop' && l['replica'] === 'j-d0').length, 1);
    assert.equal((await adminCall(router, 'DELETE', '/replicas/j-d0')).status, 404);
  });

  it('refuses to DELETE a static replica (409) and cordons it with PATCH without stopping it', async () => {
    const a = await spawnSim({ name: 'sa' });
    const b = await spawnSim({ name: 'sb' });
    const router = await start({ replicas: [a, b].map((x) => ({ name: x.name, host: '127.0.0.1', port: x.port })) });
    const del = await adminCall(router, 'DELETE', '/replicas/sa');
    assert.equal(del.status, 409);
    assert.match(del.body.message, /not launched by this router/);
    const p = await adminCall(router, 'PATCH', '/replicas/sa', { body: { draining: true } });
    assert.equal(p.status, 200);
    assert.equal(p.body.draining, true);
    for (let i = 0; i < 4; i++) assert.equal((await post(router, `c${i}`)).headers['x-replica-name'], 'sb');
    assert.equal((await a.stats()).name, 'sa');
    const back = await adminCall(router, 'PATCH', '/replicas/sa', { body: { draining: false } });
    assert.equal(back.body.draining, false);
    assert.equal(back.body.ready, true);
  });
});

describe('adoption proves a recorded pid before it may be signalled (contract §6)', () => {
  const routers: TestRouter[] = [];
  const sleepers: number[] = [];
  after(async () => {
    for (const r of routers) await r.close().catch(() => undefined);
    for (const pid of sleepers) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    await stopAllSims();
  });

  /** A state file recording slot `<host>-d0` at `port` with `pid`. */
  /** The pid of a process that has just exited (a recorded pid that no longer runs). */
  const deadPid = async (): Promise<number> => {
    const p = spawn('true', [], { stdio: 'ignore' });
    await new Promise((done) => p.once('exit', done));
    return p.pid!;
  };

  const stateFile = (host: string, port: number, pid: number): string => {
    const path = join(tempDir('ar-adopt-'), 'state.json');
    const replica = { slot: `${host}-d0`, host, devices: [0], address: '127.0.0.1', port, scheme: 'http', pid, launched_at: null, model: 'sim-model' };
    writeFileSync(path, JSON.stringify({ version: 1, epoch: 1, replicas: [replica], sessions: [] }));
    return path;
  };

  it('adopts a live endpoint whose recorded pid is another live process without that pid, and never signals it', async () => {
    const base = await freePortRange(1);
    const sim = await spawnSim({ name: 'v-d0', port: base });
    // The recorded pid is alive but is not the replica: a process group of its own, so a wrong
    // stop (kill -TERM -pid) would end it.
    const sleeper = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    sleepers.push(sleeper.pid!);
    const state = stateFile('v', base, sleeper.pid!);
    const router = await startTestRouter({ hosts: [simHost('v', [0], base)] }, ['--initial-replicas', '1', '--state-file', state], TOKEN_ENV);
    routers.push(router);
    const [rep] = (await adminCall(router, 'GET', '/replicas')).body.replicas;
    assert.deepEqual([rep.name, rep.kind, rep.ready, rep.pid], ['v-d0', 'adopted', true, null]);
    const why = await router.waitForLog((l) => l['event'] === 'adopt_pid_unproven');
    assert.equal(why['recorded_pid'], sleeper.pid);
    assert.match(String(why['reason']), new RegExp(`neither pid ${sleeper.pid} nor its process group holds the socket listening on port ${base}`));
    assert.equal((await router.waitForLog((l) => l['event'] === 'adopt'))['pid'], null);
    assert.equal(JSON.parse(readFileSync(state, 'utf8')).replicas[0].pid, null, 'the unproven pid is not kept in the state file');
    assert.equal((await post(router, 'adopted')).headers['x-replica-name'], 'v-d0', 'routed to');
    assert.equal((await sim.stats()).by_path['/v1/chat/completions'], 1);

    const del = await adminCall(router, 'DELETE', '/replicas/v-d0');
    assert.equal(del.status, 409);
    assert.match(del.body.detail, /cannot stop 'v-d0'.*without a proven pid.*no stop_command/);
    assert.equal((await adminCall(router, 'GET', '/replicas')).body.replicas[0].state, 'ready', 'a refused DELETE changes nothing');

    await router.close();
    await router.waitForLog((l) => l['event'] === 'stop_skipped' && l['replica'] === 'v-d0');
    assert.equal(pidAlive(sleeper.pid!), true, 'the recorded pid was never signalled');
    assert.equal((await sim.stats()).name, 'v-d0', 'the replica keeps running');
    assert.equal(
      router.logs().some((l) => l['event'] === 'stop' && l['replica'] === 'v-d0'),
      false,
    );
    const left = JSON.parse(readFileSync(state, 'utf8')).replicas as Array<{ slot: string; pid: number | null }>;
    assert.deepEqual(
      left.map((r) => [r.slot, r.pid]),
      [['v-d0', null]],
      'a replica left running stays recorded for the next start',
    );
  });

  it('adopts a live endpoint whose recorded pid is dead without a pid; DELETE stops it with the stop_command', async () => {
    const base = await freePortRange(1);
    const sim = await spawnSim({ name: 'w-d0', port: base });
    const dead = await deadPid();
    const state = stateFile('w', base, dead);
    const host = simHost('w', [0], base, [], { stop_command: ['pkill', '-f', 'replica.js --port {port} '] });
    const router = await startTestRouter({ hosts: [host] }, ['--initial-replicas', '1', '--state-file', state], TOKEN_ENV);
    routers.push(router);
    const [rep] = (await adminCall(router, 'GET', '/replicas')).body.replicas;
    assert.deepEqual([rep.name, rep.kind, rep.ready, rep.pid], ['w-d0', 'adopted', true, null]);
    const why = await router.waitForLog((l) => l['event'] === 'adopt_pid_unproven');
    assert.match(String(why['reason']), new RegExp(`pid ${dead} is not alive`));
    const del = await adminCall(router, 'DELETE', '/replicas/w-d0');
    assert.equal(del.status, 200);
    assert.equal(del.body.stopped, true);
    await sim.exited(); // stopped by the stop_command: the router had no pid to signal
    assert.equal(pidAlive(sim.pid), false);
    assert.equal(
      router.logs().some((l) => l['event'] === 'stop_failed'),
      false,
    );
    assert.deepEqual(await fleetEvents(router), { launch: 0, stop: 1, adoption: 1, launch_failure: 0, launch_timeout: 0, exit: 0 });
  });

  it('escalates to signals when a launched replica still answers --stop-grace after its stop_command', async () => {
    const base = await freePortRange(1);
    const host = simHost('x', [0], base, [], { stop_command: ['true'] }); // succeeds, stops nothing
    const router = await startTestRouter({ hosts: [host] }, ['--initial-replicas', '1', '--stop-grace', '1'], TOKEN_ENV);
    routers.push(router);
    const [rep] = await waitFor(
      async () => {
        const l = (await adminCall(router, 'GET', '/replicas')).body.replicas;
        return l.length === 1 && l[0].ready ? l : undefined;
      },
      15_000,
      'the replica ready',
    );
    const del = await adminCall(router, 'DELETE', '/replicas/x-d0');
    assert.equal(del.status, 200, JSON.stringify(del.body));
    assert.equal(del.body.stopped, true);
    // The stop answers once the replica no longer serves; its process may take a moment more to be reaped.
    await waitFor(() => !pidAlive(rep.pid), 5_000, 'the signals to stop what the stop_command did not');
    const line = router.logs().find((l) => l['event'] === 'stop_escalated');
    assert.equal(line?.['pid'], rep.pid);
    assert.deepEqual((await adminCall(router, 'GET', '/fleet')).body.capacity.free_slots, ['x-d0']);
  });

  it('keeps the slot and answers 502 stop_incomplete when a replica without a proven pid still answers after its stop_command', async () => {
    const base = await freePortRange(1);
    const sim = await spawnSim({ name: 'y-d0', port: base });
    const dead = await deadPid();
    const state = stateFile('y', base, dead);
    const host = simHost('y', [0], base, [], { stop_command: ['true'] });
    const router = await startTestRouter({ hosts: [host] }, ['--initial-replicas', '1', '--state-file', state, '--stop-grace', '1'], TOKEN_ENV);
    routers.push(router);
    const del = await adminCall(router, 'DELETE', '/replicas/y-d0');
    assert.equal(del.status, 502, JSON.stringify(del.body));
    assert.equal(del.body.code, 'stop_incomplete');
    assert.match(del.body.detail, /still answers .* slot y-d0 stays reserved/);
    assert.equal(pidAlive(sim.pid), true, 'nothing was signalled: the pid was never proven');
    const fleet = (await adminCall(router, 'GET', '/fleet')).body;
    assert.deepEqual(fleet.capacity.free_slots, [], 'no second replica may launch onto its devices');
    assert.ok(router.logs().some((l) => l['event'] === 'stop_incomplete' && l['replica'] === 'y-d0'));
    const recorded = JSON.parse(readFileSync(state, 'utf8')) as { replicas: { slot: string }[] };
    assert.deepEqual(
      recorded.replicas.map((r) => r.slot),
      ['y-d0'],
      'the next start adopts it again',
    );
    assert.equal((await fleetEvents(router)).stop, 0);
  });
});
