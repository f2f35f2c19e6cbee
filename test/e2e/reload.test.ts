import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { simRequest, simStream, spawnSim, type SimProcess } from '../support/sim-process.js';
import { adminCall, TEST_TOKEN, waitFor, writeTempConfig } from '../support/router.js';
import { freePortRange, pidAlive, spawnRouter, type RouterProcess } from '../support/router-process.js';
import { simHost } from '../support/fleet.js';
import { parseProm, sum } from '../support/prom.js';
import { startRedis } from '../support/redis.js';

/** One short chat turn of `session` through `router`; answers the replica that served it. */
async function askOn(router: { url: string }, session: string): Promise<string> {
  const r = await simRequest(`${router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'x-session-id': session, 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })),
  });
  assert.equal(r.status, 200, r.body.toString());
  return String(r.headers['x-replica-name']);
}

/**
 * Config reload without restart (issue 29 item 1, docs/reload.md), on one router process as an
 * operator runs it: the file is rewritten, then SIGHUP or POST /admin/reload. Once with the
 * primary alone and once with two workers relaying the requests (the primary reloads, routes and
 * owns the fleet either way).
 */
for (const workers of [1, 2])
  describe(`config reload (--workers ${workers})`, () => {
    let sims: SimProcess[];
    let router: RouterProcess;
    let file: string;
    let base: number;
    let host: ReturnType<typeof simHost>;
    const staticEntry = (s: SimProcess): Record<string, unknown> => ({ name: s.name, host: '127.0.0.1', port: s.port });
    const write = (replicas: SimProcess[], devices: number[], routing: Record<string, unknown> = {}): void =>
      writeFileSync(file, JSON.stringify({ replicas: replicas.map(staticEntry), hosts: [{ ...host, devices }], routing }, null, 2));
    const chat = (tokens: number): string =>
      JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: tokens, stream: true });
    const ask = (session: string): Promise<string> => askOn(router, session);
    const replicas = async (): Promise<Array<{ name: string; ready: boolean; draining: boolean; pid?: number }>> =>
      (await adminCall(router, 'GET', '/replicas')).body.replicas;
    const reloads = async (result: string): Promise<number> =>
      sum(parseProm((await simRequest(`${router.url}/metrics`)).body.toString()).samples, 'affinity_router_config_reloads_total', { result });
    const reloadLogs = (): Array<Record<string, unknown>> => router.logs().filter((l) => l['event'] === 'config_reload' && l['trigger'] === 'sighup');
    const sighup = async (): Promise<Record<string, unknown>> => {
      const seen = reloadLogs().length;
      router.child.kill('SIGHUP');
      return waitFor(() => reloadLogs()[seen], 10_000, 'the reload log line');
    };

    before(async () => {
      sims = await Promise.all(['a', 'b', 'c'].map((name) => spawnSim({ name, args: ['--itl-ms', '50'] })));
      const fleetArgs = ['--health-interval', '0.2', '--health-timeout', '1', '--initial-replicas', '0', '--workers', String(workers)];
      base = await freePortRange(2);
      host = simHost('node', [0], base);
      file = writeTempConfig({});
      write([sims[0], sims[1]], [0]);
      router = await spawnRouter(['--config', file, ...fleetArgs], { ROUTER_ADMIN_TOKEN: TEST_TOKEN });
    });
    after(async () => {
      router?.child.kill('SIGTERM');
      await router?.exited();
      await Promise.all(sims.map((s) => s.kill()));
    });

    it('adds a static replica (routable once healthy) through POST /admin/reload, and counts and hashes the reload', async () => {
      const infoBefore = parseProm((await simRequest(`${router.url}/metrics`)).body.toString()).samples.find((s) => s.name === 'affinity_router_config_info');
      write([sims[0], sims[1], sims[2]], [0]);
      const r = await adminCall(router, 'POST', '/admin/reload');
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body.changed, ['replicas']);
      assert.deepEqual(r.body.fleet.replicas_added, ['c']);
      assert.deepEqual(r.body.restart_required, []);
      await waitFor(async () => (await replicas()).find((x) => x.name === 'c')?.ready, 10_000, 'c to become ready');
      const placed = new Set<string>();
      for (let i = 0; i < 30 && !placed.has('c'); i++) placed.add(await ask(`add-${i}`));
      assert.ok(placed.has('c'), `new conversations reach the added replica: ${[...placed].join(',')}`);
      assert.equal(await reloads('applied'), 1);
      const info = parseProm((await simRequest(`${router.url}/metrics`)).body.toString()).samples.find((s) => s.name === 'affinity_router_config_info');
      assert.match(String(info?.labels['hash']), /^[0-9a-f]{12}$/);
      assert.notEqual(info?.labels['hash'], infoBefore?.labels['hash'], 'the hash follows the file');
      assert.ok(
        router.logs().some((l) => l['event'] === 'audit' && l['what'] === 'reload config' && l['result'] === 'ok'),
        'the reload is audited',
      );
    });

    it('removes a static replica carrying a stream on SIGHUP: the stream completes, no new request goes there, it is never stopped', async () => {
      let session = '';
      for (let i = 0; session === '' && i < 60; i++) if ((await ask(`rm-${i}`)) === 'a') session = `rm-${i}`;
      assert.notEqual(session, '', 'a session pinned to a');
      const stream = await simStream(`${router.url}/v1/chat/completions`, { headers: { 'x-session-id': session }, body: chat(40) });
      assert.equal(stream.headers['x-replica-name'], 'a');
      await stream.waitForEvents(2);
      write([sims[1], sims[2]], [0]);
      const line = await sighup();
      assert.equal(line['result'], 'applied');
      assert.equal(line['trigger'], 'sighup');
      await waitFor(
        () => router.logs().find((l) => l['event'] === 'audit' && l['who'] === 'SIGHUP' && l['what'] === 'reload config' && l['result'] === 'ok'),
        5_000,
        'the audit line of the SIGHUP',
      );
      assert.deepEqual(line['replicas_removed'], ['a']);
      const placed = await Promise.all(Array.from({ length: 20 }, (_, i) => ask(`after-rm-${i}`)));
      assert.ok(!placed.includes('a'), `no new conversation on a: ${placed.join(',')}`);
      assert.notEqual(await ask(session), 'a', 'its pinned session moved');
      assert.equal(await stream.done, 'end');
      assert.equal(stream.events.at(-1)?.data, '[DONE]');
      await waitFor(async () => !(await replicas()).some((x) => x.name === 'a'), 10_000, 'a to leave the registry');
      assert.equal((await simRequest(`${sims[0].url}/health`)).status, 200, 'a static replica is never stopped');
    });

    it('changes routing.affinity_slack for the next decisions', async () => {
      // A session pinned to b, and one stream holding a place on b: within the default slack (8) the
      // session stays; with slack 0 its next turn moves to an idle replica.
      let session = '';
      for (let i = 0; session === '' && i < 60; i++) if ((await ask(`slack-${i}`)) === 'b') session = `slack-${i}`;
      let holder = '';
      for (let i = 0; holder === '' && i < 60; i++) if ((await ask(`hold-${i}`)) === 'b') holder = `hold-${i}`;
      const stream = await simStream(`${router.url}/v1/chat/completions`, { headers: { 'x-session-id': holder }, body: chat(60) });
      assert.equal(stream.headers['x-replica-name'], 'b');
      await stream.waitForEvents(1);
      assert.equal(await ask(session), 'b', 'retained within the default slack');
      write([sims[1], sims[2]], [0], { affinity_slack: 0 });
      const r = await adminCall(router, 'POST', '/admin/reload');
      assert.deepEqual(r.body.changed, ['routing.affinity_slack']);
      assert.equal(await ask(session), 'c', 'moved off the busier replica with slack 0');
      stream.destroy();
    });

    it('grows a host (a new slot to launch into) and shrinks it (the replica in the lost slot drained and stopped, none orphaned)', async () => {
      write([sims[1], sims[2]], [0, 1], { affinity_slack: 0 });
      const grown = await adminCall(router, 'POST', '/admin/reload');
      assert.deepEqual(grown.body.fleet.slots_added, ['node-d1']);
      assert.deepEqual(grown.body.changed, ['--max-replicas', 'hosts']);
      const fleet = (await adminCall(router, 'GET', '/fleet')).body;
      assert.deepEqual(
        fleet.slots.map((s: { name: string; port: number }) => [s.name, s.port]),
        [
          ['node-d0', base],
          ['node-d1', base + 1],
        ],
      );
      for (const slot of ['node-d0', 'node-d1']) {
        const launched = await adminCall(router, 'POST', '/replicas');
        assert.equal(launched.status, 202, JSON.stringify(launched.body));
        assert.equal(launched.body.name, slot);
      }
      await waitFor(async () => (await replicas()).filter((x) => x.name.startsWith('node-') && x.ready).length === 2, 15_000, 'both launched replicas ready');
      const pid = (await replicas()).find((x) => x.name === 'node-d1')?.pid;
      assert.ok(pid !== undefined && pidAlive(pid));
      write([sims[1], sims[2]], [0], { affinity_slack: 0 });
      const shrunk = await adminCall(router, 'POST', '/admin/reload');
      assert.deepEqual(shrunk.body.fleet.slots_removed, ['node-d1']);
      assert.deepEqual(shrunk.body.fleet.stopping, ['node-d1']);
      await waitFor(() => !pidAlive(pid), 15_000, 'the replica of the removed slot to be stopped');
      await waitFor(async () => !(await replicas()).some((x) => x.name === 'node-d1'), 10_000, 'node-d1 to leave the registry');
      const after = (await adminCall(router, 'GET', '/fleet')).body;
      assert.deepEqual(
        after.slots.map((s: { name: string }) => s.name),
        ['node-d0'],
      );
      assert.ok(
        (await replicas()).some((x) => x.name === 'node-d0' && x.ready),
        'the replica in the kept slot runs on',
      );
    });

    it('refuses an invalid file and a file that disappeared, naming the path; nothing changes and the router keeps serving', async () => {
      const before = (await replicas()).map((x) => x.name).sort();
      writeFileSync(file, JSON.stringify({ replicas: [{ name: 'b', host: '127.0.0.1', port: 'eighty' }] }));
      const r = await adminCall(router, 'POST', '/admin/reload');
      assert.equal(r.status, 422, JSON.stringify(r.body));
      assert.equal(r.body.code, 'invalid_config');
      assert.ok(
        r.body.problems.some((p: { path: string }) => p.path === 'replicas[0].port'),
        JSON.stringify(r.body.problems),
      );
      rmSync(file);
      const line = await sighup();
      assert.equal(line['result'], 'invalid');
      assert.match(JSON.stringify(line['problems']), new RegExp(file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'the problem names the file');
      assert.deepEqual((await replicas()).map((x) => x.name).sort(), before);
      assert.equal(await reloads('invalid'), 2);
      for (let i = 0; i < 5; i++) await ask(`still-${i}`);
    });

    it('takes a new session header and TTL for the next request, and names the settings only a restart changes', async () => {
      // Back to the default slack: with 0, a turn sent as the previous one is still being settled may move.
      write([sims[1], sims[2]], [0], { session_header: 'x-conversation', session_ttl: 120, max_sessions: 50 });
      const r = await adminCall(router, 'POST', '/admin/reload');
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body.changed, ['routing.affinity_slack', 'routing.session_header', 'routing.session_ttl']);
      assert.deepEqual(r.body.restart_required, ['routing.max_sessions']);
      const send = async (headers: Record<string, string>) =>
        simRequest(`${router.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: Buffer.from(JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })),
        });
      const first = await send({ 'x-conversation': 'conv-after-reload' });
      assert.equal(first.headers['x-session-id'], 'conv-after-reload', 'the new header carries the session');
      for (let i = 0; i < 3; i++)
        assert.equal((await send({ 'x-conversation': 'conv-after-reload' })).headers['x-replica-name'], first.headers['x-replica-name']);
      assert.notEqual((await send({ 'x-session-id': 'old-header' })).headers['x-session-id'], 'old-header', 'the old header is no longer read');
    });
  });

describe('config reload with two routers on Redis, two workers each', () => {
  it('the routers share sessions and one leader; every router applies routing settings; only the leader stops the replica of a slot that left', async (t) => {
    const rd = await startRedis();
    if (rd === null) return void t.skip('redis-server is not installed');
    const routers: RouterProcess[] = [];
    let pids: number[] = [];
    try {
      const base = await freePortRange(2);
      const host = simHost('lh', [0, 1], base);
      const file = writeTempConfig({ hosts: [host] });
      const flags = ['--config', file, '--redis-url', rd.url, '--health-interval', '0.2', '--initial-replicas', '2', '--workers', '2'];
      routers.push(await spawnRouter(flags, { ROUTER_ADMIN_TOKEN: TEST_TOKEN }));
      const [leader] = routers as [RouterProcess];
      const fleet = await waitFor(
        async () => {
          const l = (await adminCall(leader, 'GET', '/replicas')).body.replicas as Array<{ name: string; ready: boolean; pid: number }>;
          return l.length === 2 && l.every((r) => r.ready) ? l : undefined;
        },
        15_000,
        'the leader to launch two replicas',
      );
      pids = fleet.map((r) => r.pid);
      routers.push(await spawnRouter(flags, { ROUTER_ADMIN_TOKEN: TEST_TOKEN }));
      const follower = routers[1];
      await waitFor(
        async () => (await adminCall(follower, 'GET', '/replicas')).body.replicas.filter((r: { ready: boolean }) => r.ready).length === 2,
        10_000,
        'the follower to mirror the fleet',
      );
      assert.equal(leader.logs().filter((l) => l['event'] === 'launch').length, 2);
      // Sessions are shared: each turn alternates routers (and lands on either router's workers).
      for (let i = 0; i < 20; i++) {
        const first = await askOn(i % 2 === 0 ? leader : follower, `shared-${i}`);
        for (let turn = 1; turn < 4; turn++)
          assert.equal(await askOn(turn % 2 === i % 2 ? leader : follower, `shared-${i}`), first, `shared-${i} turn ${turn}`);
      }
      writeFileSync(file, JSON.stringify({ hosts: [{ ...host, devices: [0] }], routing: { affinity_slack: 3 } }));
      const followed = await adminCall(follower, 'POST', '/admin/reload');
      assert.equal(followed.status, 200, JSON.stringify(followed.body));
      assert.ok(followed.body.changed.includes('routing.affinity_slack'), 'a follower applies routing settings');
      assert.deepEqual(followed.body.fleet.slots_removed, ['lh-d1']);
      assert.deepEqual(followed.body.fleet.stopping, [], 'a follower stops nothing');
      const led = await adminCall(leader, 'POST', '/admin/reload');
      assert.deepEqual(led.body.fleet.stopping, ['lh-d1']);
      const gone = fleet.find((r) => r.name === 'lh-d1')!.pid;
      const kept = fleet.find((r) => r.name === 'lh-d0')!.pid;
      await waitFor(() => !pidAlive(gone), 15_000, 'the leader to stop lh-d1');
      await waitFor(async () => (await adminCall(follower, 'GET', '/replicas')).body.replicas.length === 1, 10_000, 'the follower to follow');
      assert.ok(pidAlive(kept), 'the replica of the kept slot runs on');
      assert.equal(follower.logs().filter((l) => l['event'] === 'stop' || l['event'] === 'launch').length, 0, 'the follower launched and stopped nothing');
    } finally {
      for (const r of routers) r.child.kill('SIGTERM');
      await Promise.all(routers.map((r) => r.exited()));
      for (const pid of pids) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
      await rd.stop();
    }
  });
});
