import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSim, simRequest, simStream, stopAllSims } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { freePortRange, pidAlive } from '../support/router-process.js';
import { simHost } from '../support/fleet.js';

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

describe('fleet (SPEC §6)', () => {
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
    const router = await start({ hosts: [simHost('h', [0, 1, 2, 3], base, ['--startup-delay', '1'], { devices_per_replica: 2 })] }, ['--initial-replicas', '2']);
    const list = await adminCall(router, 'GET', '/replicas');
    assert.deepEqual(list.body.replicas.map((r: { name: string; state: string; kind: string }) => [r.name, r.state, r.kind]), [
      ['h-d0', 'launching', 'launched'],
      ['h-d2', 'launching', 'launched'],
    ]);
    assert.deepEqual(list.body.replicas.map((r: { url: string }) => r.url), [`http://127.0.0.1:${base}`, `http://127.0.0.1:${base + 2}`]);
    const early = await post(router, 'early');
    assert.equal(early.status, 503);
    await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas.every((r: { ready: boolean }) => r.ready), 10_000, 'both replicas ready');
    const names = new Set<string>();
    for (let i = 0; i < 4; i++) names.add(String((await post(router, `s${i}`)).headers['x-replica-name']));
    assert.deepEqual([...names].sort(), ['h-d0', 'h-d2']);
    const stats = (await simRequest(`http://127.0.0.1:${base}/__sim/stats`)).body.toString();
    assert.equal(JSON.parse(stats).devices, '0,1');
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

  it('stops a replica not ready within --launch-timeout, frees its slot and reports the log path and tail', async () => {
    const base = await freePortRange(1);
    const router = await start({ hosts: [simHost('t', [0], base, ['--startup-delay', '60', '--show-startup-logs'])] }, ['--initial-replicas', '1', '--launch-timeout', '1']);
    const pid = await pidOf(router, 't-d0');
    assert.ok(pidAlive(pid));
    const fleet = await waitFor(async () => {
      const f = await adminCall(router, 'GET', '/fleet');
      return f.body.failures.length > 0 && f.body.slots[0].state === 'free' ? f.body : undefined;
    }, 15_000, 'the launch timeout');
    assert.match(fleet.failures[0].reason, /launch-timeout/);
    assert.match(fleet.failures[0].log_path, /t-d0\.log$/);
    assert.ok(fleet.failures[0].log_tail.length > 0, 'log tail reported');
    assert.deepEqual(fleet.capacity.free_slots, ['t-d0']);
    await waitFor(() => !pidAlive(pid), 5_000, 'the process to be gone');
    assert.equal((await adminCall(router, 'GET', '/replicas')).body.replicas.length, 0);
    await router.waitForLog((l) => l['event'] === 'replica_failed' && Array.isArray(l['log_tail']));
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
    await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas.find((r: { name: string }) => r.name === victim)?.draining, 2_000, 'draining');
    const next = await post(router, 'long');
    assert.equal(next.headers['x-replica-name'], other);
    for (let i = 0; i < 4; i++) assert.equal((await post(router, `new-${i}`)).headers['x-replica-name'], other);
    assert.equal(await s.done, 'end');
    assert.equal(s.events.at(-1)?.data, '[DONE]');
    const answer = await del;
    assert.equal(answer.status, 200);
    assert.equal(answer.body.stopped, true);
    assert.equal(answer.body.name, victim);
    assert.ok(!pidAlive(pid), 'process gone');
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
    assert.ok(took > 800 && took < 2_500, `cut after ${took} ms`);
    const last = JSON.parse(s.events.at(-1)!.data) as { error?: { code: string } };
    assert.equal(last.error?.code, 'replica_disconnected');
    assert.equal(s.events.some((e) => e.data === '[DONE]'), false);
    assert.equal((await del).status, 200);
  });

  it('joins a second DELETE to the running drain (one stop), answers ?wait=false with 202 at once', async () => {
    const base = await freePortRange(1);
    const router = await start({ hosts: [simHost('j', [0], base, ['--itl-ms', '100'])] }, ['--initial-replicas', '1']);
    await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas[0]?.ready, 10_000, 'ready');
    const s = await simStream(`${router.url}/v1/chat/completions`, { body: chat({ stream: true, max_tokens: 10 }) });
    await s.waitForEvents(1);
    const t0 = performance.now();
    const quick = await adminCall(router, 'DELETE', '/replicas/j-d0?wait=false');
    assert.ok(performance.now() - t0 < 500);
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
