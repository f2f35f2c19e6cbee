import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { simRequest, simStream, stopAllSims } from '../support/sim-process.js';
import { adminCall, TEST_TOKEN, waitFor, writeTempConfig } from '../support/router.js';
import { freePortRange, pidAlive, spawnRouter, MAIN_ENTRY, type RouterProcess } from '../support/router-process.js';
import { fleetEvents, pidGone, replicaState, simHost } from '../support/fleet.js';
import { recordedPins, snapshotPins } from '../support/state-file.js';
import { journalPathOf } from '../../src/modules/state/state-journal.js';
import { parseProm, sum } from '../support/prom.js';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { tempDir } from '../../src/common/temp-dir.fake.js';

const ENV = { ROUTER_ADMIN_TOKEN: TEST_TOKEN };
const chat = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });
const allReady = (r: { url: string }) => async () => {
  const l = await adminCall(r, 'GET', '/replicas');
  return l.body.replicas.length > 0 && l.body.replicas.every((x: { ready: boolean }) => x.ready) ? l.body.replicas : undefined;
};

/** Run main.js to completion (for exit-code checks). */
function runRouter(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((done) => {
    const c = spawn(process.execPath, [MAIN_ENTRY, '--host', '127.0.0.1', '--port', '0', ...args], {
      env: { ...process.env, ...ENV },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    c.stderr.on('data', (d: Buffer) => (err += d.toString()));
    c.on('exit', (code) => done({ code, stderr: err }));
  });
}

describe('router process lifecycle (contract §6)', () => {
  const procs: RouterProcess[] = [];
  const killedPids: number[] = [];
  after(async () => {
    for (const p of procs) p.child.kill('SIGKILL');
    for (const pid of killedPids) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    await stopAllSims();
  });

  it('on SIGTERM turns /readyz 503 first, finishes the stream in flight, stops every launched replica and exits 0', async () => {
    const base = await freePortRange(2);
    const cfg = writeTempConfig({ hosts: [simHost('g', [0, 1], base, ['--itl-ms', '100'])] });
    const router = await spawnRouter(['--config', cfg, '--initial-replicas', '2', '--health-interval', '0.2'], ENV);
    procs.push(router);
    const replicas = await waitFor(allReady(router), 15_000, 'ready replicas');
    const pids: number[] = replicas.map((r: { pid: number }) => r.pid);
    killedPids.push(...pids);
    assert.equal((await simRequest(`${router.url}/readyz`)).status, 200);
    const s = await simStream(`${router.url}/v1/chat/completions`, { body: chat({ stream: true, max_tokens: 40 }) });
    let finished = false;
    s.done.then(
      () => (finished = true),
      () => (finished = true),
    );
    await s.waitForEvents(1);
    router.child.kill('SIGTERM');
    const ready = await waitFor(
      async () => {
        const r = await simRequest(`${router.url}/readyz`);
        return r.status === 503 ? (JSON.parse(r.body.toString()) as { status: string; phase: string }) : undefined;
      },
      5_000,
      '/readyz to turn 503',
    );
    assert.deepEqual([ready.status, ready.phase], ['stopping', 'stopping'], 'not ready because the router is stopping');
    // 503 came first: the stream (40 tokens, 100 ms apart: 4 s, room for a loaded machine) was still running at that moment.
    assert.equal(finished, false, 'the stream was still running when /readyz answered 503');
    assert.ok(s.events.length < 42, `${s.events.length} of 42 events had arrived`);
    const refused = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', body: Buffer.from(chat()) });
    assert.equal(refused.status, 503);
    assert.equal(refused.headers['connection'], 'close');
    assert.equal(await s.done, 'end');
    assert.equal(s.events.at(-1)?.data, '[DONE]');
    const exit = await router.exited();
    assert.equal(exit.code, 0);
    for (const pid of pids) assert.equal(pidAlive(pid), false, `replica pid ${pid} survived`);
  });

  it('holds a signal that arrives during start-up and drains once up: the replica launched meanwhile is stopped, exit 0', async () => {
    const base = await freePortRange(2);
    // Slot h-d1 is recorded in the state file at a listener that accepts and never answers, so
    // start-up sits in the adoption probe (up to --health-timeout) with the handlers installed.
    let probed!: () => void;
    const probing = new Promise<void>((r) => (probed = r));
    const sockets = new Set<import('node:net').Socket>();
    const blackHole = createServer((sock) => {
      sockets.add(sock);
      probed();
    });
    await new Promise<void>((r) => blackHole.listen(base + 1, '127.0.0.1', r));
    try {
      const state = join(tempDir('ar-early-'), 'state.json');
      writeFileSync(state, JSON.stringify({ replicas: [{ slot: 'h-d1', host: 'h', devices: [1], address: '127.0.0.1', port: base + 1 }] }));
      const cfg = writeTempConfig({ hosts: [simHost('h', [0, 1], base)] });
      const child = spawn(
        process.execPath,
        [MAIN_ENTRY, '--host', '127.0.0.1', '--port', '0', '--config', cfg, '--state-file', state, '--initial-replicas', '1', '--health-timeout', '3'],
        { env: { ...process.env, ...ENV }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      await probing;
      assert.equal(out.includes('"event":"listening"'), false, 'still starting when the signal is sent');
      child.kill('SIGINT');
      const code = await exited;
      assert.equal(code, 0, err);
      assert.match(err, /received SIGINT during start-up/);
      const lines = out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const launch = lines.find((l) => l['event'] === 'launch');
      assert.ok(launch !== undefined, 'the initial replica was launched during start-up');
      killedPids.push(launch['pid'] as number);
      assert.ok(
        lines.some((l) => l['event'] === 'shutdown' && l['signal'] === 'SIGINT'),
        'the held signal started the drain',
      );
      assert.ok(lines.some((l) => l['event'] === 'stop' && l['replica'] === launch['replica']));
      assert.equal(pidGone(launch['pid'] as number), true, 'the replica launched during start-up did not survive');
    } finally {
      for (const sock of sockets) sock.destroy();
      blackHole.close();
    }
  });

  it('on SIGINT stops every launched replica and exits 0', async () => {
    const base = await freePortRange(2);
    const cfg = writeTempConfig({ hosts: [simHost('i', [0, 1], base)] });
    const router = await spawnRouter(['--config', cfg, '--initial-replicas', '2', '--health-interval', '0.2'], ENV);
    procs.push(router);
    const pids: number[] = (await waitFor(allReady(router), 15_000, 'ready replicas')).map((r: { pid: number }) => r.pid);
    killedPids.push(...pids);
    router.child.kill('SIGINT');
    assert.equal((await router.exited()).code, 0);
    for (const pid of pids) assert.equal(pidAlive(pid), false, `replica pid ${pid} survived`);
    assert.ok(router.logs().some((l) => l['event'] === 'shutdown' && l['signal'] === 'SIGINT'));
  });

  it('exits at once (130) on a second SIGINT during the drain; the replicas it did not stop yet are adopted by the next start', async () => {
    const base = await freePortRange(1);
    const state = join(tempDir('ar-twice-'), 'state.json');
    const cfg = writeTempConfig({ hosts: [simHost('f', [0], base, ['--itl-ms', '100'])] });
    const args = ['--config', cfg, '--initial-replicas', '1', '--health-interval', '0.2', '--state-file', state];
    const router = await spawnRouter(args, ENV);
    procs.push(router);
    const [rep] = await waitFor(allReady(router), 15_000, 'ready replica');
    killedPids.push(rep.pid);
    const s = await simStream(`${router.url}/v1/chat/completions`, { body: chat({ stream: true, max_tokens: 200 }) });
    await s.waitForEvents(1);
    router.child.kill('SIGINT');
    await router.waitForLog((l) => l['event'] === 'drain' && l['replica'] === 'f-d0');
    const t0 = performance.now();
    router.child.kill('SIGINT');
    const exit = await router.exited();
    assert.equal(exit.code, 130);
    assert.ok(performance.now() - t0 < 5_000, 'exited at once, not after the 20 s stream');
    assert.ok(router.logs().some((l) => l['event'] === 'shutdown_forced' && l['signal'] === 'SIGINT'));
    assert.notEqual(await s.done, 'end', 'the stream in flight was cut, not finished');
    assert.equal(pidAlive(rep.pid), true, 'a replica not stopped yet keeps running');
    assert.deepEqual(
      JSON.parse(readFileSync(state, 'utf8')).replicas.map((r: { slot: string; pid: number }) => [r.slot, r.pid]),
      [['f-d0', rep.pid]],
    );

    const next = await spawnRouter(args, ENV);
    procs.push(next);
    const list = (await adminCall(next, 'GET', '/replicas')).body.replicas;
    assert.deepEqual(
      list.map((r: { name: string; kind: string; pid: number }) => [r.name, r.kind, r.pid]),
      [['f-d0', 'adopted', rep.pid]],
    );
    next.child.kill('SIGTERM');
    assert.equal((await next.exited()).code, 0);
    assert.ok(pidGone(rep.pid), 'the clean shutdown of the next start stops it');
  });

  it('after kill -9 adopts the same pids on restart, keeps their sessions, launches nothing extra, reports the dead one as an orphan', async () => {
    const base = await freePortRange(3);
    const dir = tempDir('ar-state-');
    const state = join(dir, 'state.json');
    const cfg = writeTempConfig({ hosts: [simHost('a', [0, 1, 2], base)] });
    const args = ['--config', cfg, '--initial-replicas', '3', '--health-interval', '0.2', '--state-file', state];
    const first = await spawnRouter(args, ENV);
    procs.push(first);
    const before: Array<{ name: string; pid: number }> = await waitFor(allReady(first), 15_000, 'ready replicas');
    killedPids.push(...before.map((r) => r.pid));
    const sessions = new Map<string, string>();
    for (let i = 0; i < 6; i++) {
      const r = await simRequest(`${first.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': `keep-${i}` }, body: Buffer.from(chat()) });
      sessions.set(`keep-${i}`, String(r.headers['x-replica-name']));
    }
    await waitFor(() => recordedPins(state).length === 6, 10_000, 'pins flushed to the state file');
    first.child.kill('SIGKILL');
    await first.exited();
    for (const r of before) assert.ok(pidAlive(r.pid), 'replicas survive a router crash');
    const dead = before.find((r) => r.name === 'a-d2')!;
    process.kill(dead.pid, 'SIGKILL');
    await waitFor(() => !pidAlive(dead.pid), 10_000, 'a-d2 to die');

    const second = await spawnRouter(
      args.map((a) => (a === '3' ? '3' : a)),
      ENV,
    );
    procs.push(second);
    const list = (await adminCall(second, 'GET', '/replicas')).body;
    const adopted = list.replicas.filter((r: { kind: string }) => r.kind === 'adopted');
    assert.deepEqual(
      adopted.map((r: { name: string; pid: number }) => [r.name, r.pid]),
      before.filter((r) => r.name !== 'a-d2').map((r) => [r.name, r.pid]),
    );
    const fleet = (await adminCall(second, 'GET', '/fleet')).body;
    assert.equal(fleet.orphans.length, 1);
    assert.equal(fleet.orphans[0].slot, 'a-d2');
    assert.deepEqual(fleet.orphans[0].devices, [2]);
    // --initial-replicas 3 counts the two adopted ones: exactly one launch, into the freed slot
    const launched = list.replicas.filter((r: { kind: string }) => r.kind === 'launched');
    assert.deepEqual(
      launched.map((r: { name: string }) => r.name),
      ['a-d2'],
    );
    assert.equal(second.logs().filter((l) => l['event'] === 'launch').length, 1);
    // The lifecycle lines and counters an operator reads after a crash.
    for (const r of before.filter((x) => x.name !== 'a-d2')) {
      assert.ok(
        second.logs().some((l) => l['event'] === 'adopt' && l['replica'] === r.name && l['pid'] === r.pid),
        `adopt line of ${r.name}`,
      );
    }
    const orphanLine = second.logs().find((l) => l['event'] === 'orphan');
    assert.deepEqual([orphanLine?.['slot'], orphanLine?.['devices'], orphanLine?.['host']], ['a-d2', [2], 'a']);
    assert.ok(second.logs().some((l) => l['event'] === 'adoption_done' && l['orphans'] === 1));
    assert.equal(
      second.logs().some((l) => l['event'] === 'adopt_pid_unproven'),
      false,
      'the pids the router launched are proven',
    );
    assert.deepEqual(await fleetEvents(second), { launch: 1, stop: 0, adoption: 2, launch_failure: 0, launch_timeout: 0, exit: 0 });
    assert.equal(await replicaState(second, 'a-d0'), 'ready');
    for (const [id, replica] of sessions) {
      if (replica === 'a-d2') continue;
      const r = await simRequest(`${second.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': id }, body: Buffer.from(chat()) });
      assert.equal(r.headers['x-replica-name'], replica, `session ${id} kept its replica`);
      assert.equal(r.headers['x-router-affinity'], 'retain');
    }
    const st = await waitFor(allReady(second), 15_000, 'ready');
    killedPids.push(...st.map((r: { pid: number }) => r.pid));
    second.child.kill('SIGTERM');
    assert.equal((await second.exited()).code, 0);
  });

  it('after kill -9, a restart adopts the pins made after the last snapshot, which only the journal holds', async () => {
    const base = await freePortRange(2);
    const state = join(tempDir('ar-journal-'), 'state.json');
    const journal = journalPathOf(state);
    const cfg = writeTempConfig({ hosts: [simHost('j', [0, 1], base)] });
    const args = ['--config', cfg, '--initial-replicas', '2', '--health-interval', '0.2', '--state-file', state];
    const first = await spawnRouter(args, ENV);
    procs.push(first);
    const before: Array<{ name: string; pid: number }> = await waitFor(allReady(first), 15_000, 'ready replicas');
    killedPids.push(...before.map((r) => r.pid));
    // Both launches are fleet changes, each a snapshot, both asked for before the replicas were
    // ready. A first pin flushed to the journal of the current snapshot shows they are written:
    // the pins below come after the last snapshot.
    const chatAs = (id: string) =>
      simRequest(`${first.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': id }, body: Buffer.from(chat()) });
    // A probe pin that a later snapshot took in instead proves nothing: send another.
    let probe = 0;
    assert.equal((await chatAs(`jrnl-probe-${probe}`)).status, 200);
    await waitFor(
      async () => {
        const lines = readFileSync(journal, 'utf8').split('\n');
        const token = (JSON.parse(readFileSync(state, 'utf8')) as { journal?: string }).journal;
        if (lines[0] === JSON.stringify({ journal: token }) && lines.slice(1).some((l) => l.includes(`"jrnl-probe-${probe}"`))) return true;
        if (snapshotPins(state).some((p) => p.id === `jrnl-probe-${probe}`)) assert.equal((await chatAs(`jrnl-probe-${++probe}`)).status, 200);
        return false;
      },
      15_000,
      () =>
        `a first flush appended to the journal of the last snapshot; journal: ${readFileSync(journal, 'utf8').slice(0, 500)}; state events: ${JSON.stringify(
          first.logs().filter((l) => String(l['event']).startsWith('state_')),
        )}`,
    );
    const sessions = new Map<string, string>();
    for (let i = 0; i < 8; i++) {
      const r = await chatAs(`jrnl-${i}`);
      assert.equal(r.status, 200);
      sessions.set(`jrnl-${i}`, String(r.headers['x-replica-name']));
    }
    assert.equal(new Set(sessions.values()).size, 2, 'the sessions are spread over both replicas');
    await waitFor(() => recordedPins(state).length === 9 + probe, 10_000, 'the pins flushed to the journal');
    assert.deepEqual(
      snapshotPins(state).filter((p) => sessions.has(p.id)),
      [],
      'the snapshot was not rewritten: the pins are in the journal only',
    );
    assert.ok(readFileSync(journal, 'utf8').split('\n').length > 2, 'the journal has a header and at least one flush');
    // The metrics count both kinds of write, with their time and loop hold.
    const { samples } = parseProm((await simRequest(`${first.url}/metrics`)).body.toString('utf8'));
    const sample = (name: string, kind: string, result?: string): number => sum(samples, name, result === undefined ? { kind } : { kind, result });
    assert.ok(sample('affinity_router_state_writes_total', 'snapshot', 'ok') >= 2, 'the two launches were snapshots');
    assert.ok(sample('affinity_router_state_writes_total', 'journal', 'ok') >= 1, 'the flushes were journal lines');
    assert.equal(sample('affinity_router_state_writes_total', 'journal', 'error'), 0);
    assert.equal(
      sample('affinity_router_state_write_loop_hold_seconds_count', 'journal'),
      sample('affinity_router_state_writes_total', 'journal', 'ok'),
      'every journal write measured its loop hold',
    );
    first.child.kill('SIGKILL');
    await first.exited();

    const second = await spawnRouter(args, ENV);
    procs.push(second);
    assert.ok(second.logs().some((l) => l['event'] === 'state_journal_applied'));
    for (const [id, replica] of sessions) {
      const r = await simRequest(`${second.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': id }, body: Buffer.from(chat()) });
      assert.equal(r.headers['x-replica-name'], replica, `session ${id} kept its replica`);
      assert.equal(r.headers['x-router-affinity'], 'retain');
    }
    // After adoption the router compacted: a new snapshot holds the pins, its journal only its header.
    const compacted = JSON.parse(readFileSync(state, 'utf8')) as { journal: string; sessions: unknown[] };
    assert.equal(compacted.sessions.length, 9 + probe);
    assert.equal(readFileSync(journal, 'utf8'), `${JSON.stringify({ journal: compacted.journal })}\n`);
    second.child.kill('SIGTERM');
    assert.equal((await second.exited()).code, 0);
  });

  it('adopts a pypto-serving-router state file (no version) the same way', async () => {
    const base = await freePortRange(1);
    const host = simHost('p', [0], base);
    const cfg = writeTempConfig({ hosts: [host] });
    const first = await spawnRouter(['--config', cfg, '--initial-replicas', '1', '--health-interval', '0.2'], ENV);
    procs.push(first);
    const [rep] = await waitFor(allReady(first), 15_000, 'ready');
    killedPids.push(rep.pid);
    first.child.kill('SIGKILL');
    await first.exited();
    const state = join(tempDir('ar-pypto-'), 'state.json');
    writeFileSync(state, JSON.stringify({ replicas: [{ slot: 'p-d0', host: 'p', devices: [0], address: '127.0.0.1', port: base }] }, null, 2));
    const second = await spawnRouter(['--config', cfg, '--initial-replicas', '1', '--state-file', state], ENV);
    procs.push(second);
    const list = (await adminCall(second, 'GET', '/replicas')).body.replicas;
    assert.deepEqual(
      list.map((r: { name: string; kind: string; ready: boolean }) => [r.name, r.kind, r.ready]),
      [['p-d0', 'adopted', true]],
    );
    assert.equal(second.logs().filter((l) => l['event'] === 'launch').length, 0);
    const written = JSON.parse(readFileSync(state, 'utf8'));
    assert.equal(written.version, 1);
    second.child.kill('SIGTERM');
    assert.equal((await second.exited()).code, 0);
    // no pid in a pypto state file: never signalled, reported instead
    assert.ok(second.logs().some((l) => l['event'] === 'stop_skipped' && l['replica'] === 'p-d0'));
    assert.equal(pidAlive(rep.pid), true);
  });

  it('exits 2 on a corrupt or future state file unless --discard-state', async () => {
    const base = await freePortRange(1);
    const cfg = writeTempConfig({ hosts: [simHost('z', [0], base)] });
    const dir = tempDir('ar-bad-');
    const corrupt = join(dir, 'corrupt.json');
    writeFileSync(corrupt, '{"version": 1, "replicas": [');
    const r1 = await runRouter(['--config', cfg, '--state-file', corrupt, '--initial-replicas', '0']);
    assert.equal(r1.code, 2);
    assert.match(r1.stderr, /^error: --state-file: .*corrupt\.json is not valid JSON/m);
    const future = join(dir, 'future.json');
    writeFileSync(future, JSON.stringify({ version: 99, epoch: 1, replicas: [], sessions: [] }));
    const r2 = await runRouter(['--config', cfg, '--state-file', future, '--initial-replicas', '0']);
    assert.equal(r2.code, 2);
    assert.match(r2.stderr, /error: --state-file version: .*newer router/);
    const ok = await spawnRouter(['--config', cfg, '--state-file', corrupt, '--initial-replicas', '0', '--discard-state'], ENV);
    procs.push(ok);
    assert.ok(ok.logs().some((l) => l['event'] === 'state_discarded'));
    ok.child.kill('SIGTERM');
    assert.equal((await ok.exited()).code, 0);
  });
});
