import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { simRequest, spawnSim, stopAllSims } from '../support/sim-process.js';
import { adminCall, adminRouterPair, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { freePortRange, pidAlive } from '../support/router-process.js';
import { simHost } from '../support/fleet.js';

describe('admin API auth and validation (contract §1, §8)', () => {
  const routers = adminRouterPair();

  // 403 with no token configured, on every route: admin-auth.test.ts.

  it('answers 401 for a missing, malformed or wrong token, and works with the right one', async () => {
    assert.equal((await adminCall(routers.open, 'GET', '/replicas', { token: null })).status, 401);
    assert.equal((await adminCall(routers.open, 'GET', '/replicas', { token: 'wrong' })).status, 401);
    assert.equal((await adminCall(routers.open, 'GET', '/replicas', { token: TEST_TOKEN.slice(0, -1) })).status, 401);
    const bare = await simRequest(`${routers.open.url}/replicas`, { headers: { authorization: TEST_TOKEN } });
    assert.equal(bare.status, 401);
    assert.equal(bare.headers['www-authenticate'], 'Bearer');
    const lower = await simRequest(`${routers.open.url}/replicas`, { headers: { authorization: `bearer ${TEST_TOKEN}` } });
    assert.equal(lower.status, 200);
    const ok = await adminCall(routers.open, 'GET', '/replicas');
    assert.equal(ok.status, 200);
    assert.deepEqual(Object.keys(ok.body.replicas[0]).sort(), [
      'devices',
      'draining',
      'kind',
      'last_health',
      'log_path',
      'models',
      'name',
      'outstanding',
      'owned',
      'pid',
      'ready',
      'routed',
      'sessions',
      'slot',
      'speed',
      'state',
      'url',
    ]);
    assert.deepEqual(ok.body.capacity, { owned: 0, ceiling: 0, free_slots: [] });
  });

  it('rejects unknown DTO fields with 400 problem+json naming the field, and changes nothing', async () => {
    const r = await adminCall(routers.open, 'PATCH', '/replicas/a0', { body: { draining: true, evil: 1 } });
    assert.equal(r.status, 400);
    assert.match(String(r.headers['content-type']), /application\/problem\+json/);
    assert.match(r.body.detail, /evil/);
    assert.equal(r.body.message, r.body.detail);
    assert.equal((await adminCall(routers.open, 'GET', '/replicas')).body.replicas[0].draining, false);
    const wrongType = await adminCall(routers.open, 'POST', '/replicas', { body: { count: 'two' } });
    assert.equal(wrongType.status, 400);
    assert.match(wrongType.body.detail, /count/);
    const notJson = await adminCall(routers.open, 'PUT', '/sessions/abc', { body: '{"replica":' });
    assert.equal(notJson.status, 400);
  });

  it('PATCH /fleet/autoscaler without an "autoscale" section is a 409 problem; GET /fleet shows it disabled', async () => {
    const r = await adminCall(routers.open, 'PATCH', '/fleet/autoscaler', { body: { paused: true } });
    assert.equal(r.status, 409);
    assert.match(String(r.headers['content-type']), /application\/problem\+json/);
    assert.match(r.body.detail, /autoscaling is not configured/);
    assert.deepEqual((await adminCall(routers.open, 'GET', '/fleet')).body.autoscaler, {
      enabled: false,
      paused: false,
      leader: true,
      settings: null,
      pools: [],
    });
  });

  it('pins a session with PUT and the next turn goes there with retain; DELETE unpins', async () => {
    const put = await adminCall(routers.open, 'PUT', '/sessions/pinned-1', { body: { replica: 'a0' } });
    assert.equal(put.status, 200);
    assert.equal(put.body.replica, 'a0');
    const got = await adminCall(routers.open, 'GET', '/sessions/pinned-1');
    assert.equal(got.body.replica, 'a0');
    assert.ok(Date.parse(got.body.expires_at) > Date.parse(got.body.last_used));
    const r = await simRequest(`${routers.open.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': 'pinned-1' }, body: Buffer.from('{}') });
    assert.equal(r.headers['x-router-affinity'], 'retain');
    assert.equal((await adminCall(routers.open, 'PUT', '/sessions/pinned-1', { body: { replica: 'nope' } })).status, 404);
    assert.equal((await adminCall(routers.open, 'DELETE', '/sessions/pinned-1')).status, 204);
    assert.equal((await adminCall(routers.open, 'GET', '/sessions/pinned-1')).status, 404);
    const counts = await adminCall(routers.open, 'GET', '/sessions?replica=a0');
    assert.equal(typeof counts.body.replicas.a0, 'number');
  });

  it('writes one audit line per mutating call with a token id, never the token', async () => {
    await adminCall(routers.open, 'PATCH', '/replicas/a0', { body: { draining: false } });
    const line = await routers.open.waitForLog((l) => l['event'] === 'audit' && String(l['what']).startsWith('patch a0'));
    assert.match(String(line['who']), /^[0-9a-f]{12}$/);
    assert.equal(JSON.stringify(routers.open.logs()).includes(TEST_TOKEN), false);
  });

  it('serves Swagger at /docs and documents every admin route and DTO at /docs-json without a token', async () => {
    const ui = await simRequest(`${routers.open.url}/docs`);
    assert.equal(ui.status, 200);
    const doc = JSON.parse((await simRequest(`${routers.open.url}/docs-json`)).body.toString()) as {
      paths: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
    };
    const routes = Object.entries(doc.paths)
      .flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`))
      .sort();
    for (const r of [
      'GET /replicas',
      'POST /replicas',
      'DELETE /replicas/{name}',
      'PATCH /replicas/{name}',
      'GET /fleet',
      'GET /sessions',
      'GET /sessions/{id}',
      'PUT /sessions/{id}',
      'DELETE /sessions/{id}',
    ]) {
      assert.ok(routes.includes(r), `${r} documented`);
    }
    for (const s of ['LaunchReplicasDto', 'PatchReplicaDto', 'PinSessionDto', 'ReplicaListView', 'FleetView'])
      assert.ok(doc.components.schemas[s], `${s} documented`);
    assert.ok(Object.keys(doc.components.securitySchemes).length > 0);
  });
});

describe('admin API with --admin-open (contract §1)', () => {
  let router: TestRouter;
  before(async () => {
    const sim = await spawnSim({ name: 'o0' });
    router = await startTestRouter({ replicas: [{ name: 'o0', host: '127.0.0.1', port: sim.port }] }, ['--admin-open']);
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  it('serves every admin route without a token, reads and writes alike (pypto-serving-router behaviour), and warns at start', async () => {
    // The warning that the admin API is open to anyone, logged once at start.
    assert.ok(
      router.logs().some((l) => l['level'] === 40 && /admin API .* is open to anyone/.test(String(l['msg']))),
      'no start-up warning',
    );
    // Reads: no Authorization header at all.
    const list = await adminCall(router, 'GET', '/replicas', { token: null });
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.replicas.map((r: { name: string }) => r.name),
      ['o0'],
    );
    assert.equal((await adminCall(router, 'GET', '/fleet', { token: null })).status, 200);
    assert.equal((await adminCall(router, 'GET', '/sessions', { token: null })).status, 200);
    // Writes are open too (no 401/403), and take effect.
    const pin = await adminCall(router, 'PUT', '/sessions/open-1', { token: null, body: { replica: 'o0' } });
    assert.equal(pin.status, 200);
    assert.equal((await adminCall(router, 'GET', '/sessions/open-1', { token: null })).body.replica, 'o0');
    assert.equal((await adminCall(router, 'DELETE', '/sessions/open-1', { token: null })).status, 204);
    const drain = await adminCall(router, 'PATCH', '/replicas/o0', { token: null, body: { draining: true } });
    assert.equal(drain.status, 200);
    assert.equal((await adminCall(router, 'GET', '/replicas', { token: null })).body.replicas[0].draining, true);
    assert.equal((await adminCall(router, 'PATCH', '/replicas/o0', { token: null, body: { draining: false } })).status, 200);
    // A bearer token, right or wrong, changes nothing: there is none to compare with.
    assert.equal((await adminCall(router, 'GET', '/replicas', { token: 'anything' })).status, 200);
    // The audit line names the caller "open".
    const line = await router.waitForLog((l) => l['event'] === 'audit' && String(l['what']).startsWith('patch o0'));
    assert.equal(line['who'], 'open');
  });
});

describe('stop_command', () => {
  after(stopAllSims);

  it('a pkill -f stop_command stops the replica and not the router or its own shell', async () => {
    const base = await freePortRange(1);
    const host = simHost('pk', [0], base, [], { stop_command: ['pkill', '-f', 'replica.js --port {port} '] });
    const router = await startTestRouter({ hosts: [host] }, ['--initial-replicas', '1'], { ROUTER_ADMIN_TOKEN: TEST_TOKEN });
    try {
      const rep = await waitFor(
        async () => (await adminCall(router, 'GET', '/replicas')).body.replicas.find((r: { ready: boolean }) => r.ready),
        10_000,
        'ready',
      );
      const del = await adminCall(router, 'DELETE', '/replicas/pk-d0');
      assert.equal(del.status, 200);
      await waitFor(() => !pidAlive(rep.pid), 5_000, 'the replica process to be gone');
      assert.equal(
        router.logs().some((l) => l['event'] === 'stop_failed'),
        false,
      );
      assert.equal((await simRequest(`${router.url}/livez`)).status, 200);
    } finally {
      await router.close();
    }
  });
});
