import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { freePort, spawnSim, simRequest, stopAllSims } from '../support/sim-process.js';
import { parseProm, sum } from '../support/prom.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { RegistryService } from '../../src/modules/registry/registry.service.js';

const chat = Buffer.from(JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }));
const post = (router: TestRouter, headers: Record<string, string> = {}) =>
  simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: chat });
const health = async (router: TestRouter) => {
  const r = await simRequest(`${router.url}/health`);
  return {
    status: r.status,
    body: JSON.parse(r.body.toString()) as { status: string; replicas: Array<{ name: string; ready: boolean; outstanding: number; routed: number }> } & Record<
      string,
      unknown
    >,
  };
};
const ready = async (router: TestRouter, name: string) => (await health(router)).body.replicas.find((r) => r.name === name)?.ready;

/**
 * A listener whose accept queue is full: a stopped process (SIGSTOP) listening with backlog 1, its
 * queue filled by a few connections of our own. Further SYNs are dropped, so a connect to it times
 * out, as to a replica that is alive but starved or flooded.
 */
async function fullAcceptQueue(): Promise<{ port: number; close(): void }> {
  const script = "const s=require('net').createServer();s.listen({port:0,host:'127.0.0.1',backlog:1},()=>process.stdout.write(s.address().port+'\\n'))";
  const child: ChildProcess = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
    child.once('exit', (code) => reject(new Error(`listener exited with ${code}`)));
  });
  child.kill('SIGSTOP');
  const fillers = Array.from({ length: 4 }, () => net.connect(port, '127.0.0.1').on('error', () => undefined));
  await waitFor(() => fillers.filter((f) => !f.connecting).length >= 2, 5_000, 'the accept queue to fill');
  return {
    port,
    close: () => {
      for (const f of fillers) f.destroy();
      child.kill('SIGKILL');
    },
  };
}

describe('health and failover (contract §5)', () => {
  after(stopAllSims);

  it('retries a refused connection once on another replica and demotes the refusing one at once', async () => {
    const dead = await freePort();
    const good = await spawnSim({ name: 'good' });
    // fall 5 and one poll a minute: the start-up probe is at most one failure of the five, so only
    // the passive connect-failure signal can make "dead" unready by the time the request returns.
    const router = await startTestRouter(
      {
        replicas: [
          { name: 'dead', host: '127.0.0.1', port: dead },
          { name: 'good', host: '127.0.0.1', port: good.port },
        ],
        health: { fall: 5 },
      },
      ['--health-interval', '60'],
    );
    try {
      const deadReplica = router.app.get(RegistryService).get('dead')!;
      assert.ok(deadReplica.health.failures < 5, `${deadReplica.health.failures} failed polls before the request`);
      // the first new session goes to index 0 = "dead"
      const r = await post(router, { 'x-session-id': 'first' });
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-replica-name'], 'good');
      assert.equal(r.headers['x-router-replica'], 'good');
      assert.equal(r.headers['x-router-affinity'], 'switch;reason=unhealthy');
      assert.equal(await ready(router, 'dead'), false);
      const unready = router.logs().filter((l) => l['event'] === 'unready');
      assert.deepEqual(
        unready.map((l) => l['replica']),
        ['dead'],
      );
      assert.match(String(unready[0]['reason']), /^connect failed: .*ECONNREFUSED/);
      for (let i = 0; i < 5; i++) assert.equal((await post(router)).headers['x-replica-name'], 'good');
      assert.equal(router.outstanding('dead'), 0);
      assert.equal(router.outstanding('good'), 0);
    } finally {
      await router.close();
    }
  });

  it('retries a connect timeout once on another replica and does not demote for it: a full accept queue is overload, not death', async () => {
    const hole = await fullAcceptQueue();
    const good = await spawnSim({ name: 'good' });
    // One active probe at start (it times out: one failure); fall 3 leaves room for two more.
    const router = await startTestRouter(
      {
        replicas: [
          { name: 'flooded', host: '127.0.0.1', port: hole.port },
          { name: 'good', host: '127.0.0.1', port: good.port },
        ],
        health: { fall: 3 },
      },
      ['--health-interval', '60', '--health-timeout', '0.3', '--connect-timeout', '0.3'],
      { ROUTER_ADMIN_TOKEN: TEST_TOKEN },
    );
    try {
      for (let i = 0; i < 4; i++) {
        const id = `flooded-${i}`;
        assert.equal((await adminCall(router, 'PUT', `/sessions/${id}`, { body: { replica: 'flooded' } })).status, 200);
        const r = await post(router, { 'x-session-id': id });
        assert.equal(r.status, 200, `request ${i}`);
        assert.equal(r.headers['x-router-replica'], 'good');
        assert.equal(r.headers['x-router-affinity'], 'switch;reason=unhealthy');
      }
      // Four connect timeouts, more than fall: a passive signal would have demoted it by now.
      assert.equal(await ready(router, 'flooded'), true);
      assert.equal(
        router.logs().some((l) => l['event'] === 'unready'),
        false,
      );
      assert.equal(router.outstanding('flooded'), 0);
      assert.equal(router.outstanding('good'), 0);
    } finally {
      await router.close();
      hole.close();
    }
  });

  it('retries a refused connection exactly once: when the retry is refused too, 502 replica_unreachable and a third, good replica sees nothing', async () => {
    const [a, b] = [await freePort(), await freePort()];
    const good = await spawnSim({ name: 'good' });
    // fall 5, one poll a minute: nothing but the data plane's own connect failures demotes a or b.
    const router = await startTestRouter(
      {
        replicas: [
          { name: 'a', host: '127.0.0.1', port: a },
          { name: 'b', host: '127.0.0.1', port: b },
          { name: 'good', host: '127.0.0.1', port: good.port },
        ],
        health: { fall: 5 },
      },
      ['--health-interval', '60'],
      { ROUTER_ADMIN_TOKEN: TEST_TOKEN },
    );
    try {
      // Pinned to a (dead). When a refuses, the retry goes to the least-loaded routable replica with
      // the rotating tiebreak: b (index 1 at cursor 0), also dead. A second retry could only go to
      // "good", the one routable replica left.
      assert.equal((await adminCall(router, 'PUT', '/sessions/s', { body: { replica: 'a' } })).status, 200);
      const r = await post(router, { 'x-session-id': 's', 'x-request-id': 'req-502' });
      assert.equal(r.status, 502);
      assert.equal(r.headers['content-type'], 'application/json');
      const e = JSON.parse(r.body.toString()) as Record<string, string>;
      assert.deepEqual([e['object'], e['type'], e['code']], ['error', 'bad_gateway', 'replica_unreachable']);
      assert.equal(typeof e['message'], 'string');
      // All four router headers (contract §3) on the 502: the replica of the last attempt, and the
      // decision that moved the session off the refusing pin.
      assert.equal(r.headers['x-session-id'], 's');
      assert.equal(r.headers['x-request-id'], 'req-502');
      assert.equal(r.headers['x-router-replica'], 'b');
      assert.equal(r.headers['x-router-affinity'], 'switch;reason=unhealthy');
      assert.deepEqual((await good.stats()).requests, 0, 'the good replica received a request: a second retry');
      // Both refusals were seen (each demoted its replica at once); "good" was routable all along.
      assert.deepEqual([await ready(router, 'a'), await ready(router, 'b'), await ready(router, 'good')], [false, false, true]);
      assert.deepEqual(
        ['a', 'b', 'good'].map((n) => router.outstanding(n)),
        [0, 0, 0],
      );
      const next = await post(router, { 'x-session-id': 's' });
      assert.equal(next.status, 200);
      assert.equal(next.headers['x-replica-name'], 'good');
      assert.equal((await good.stats()).requests, 1);
    } finally {
      await router.close();
    }
  });

  it('starts static replicas ready: routable before any health poll has passed', async () => {
    // Its /health answers 503 from the start and fall is 5: no poll can have made it ready.
    const sim = await spawnSim({ name: 'fresh', args: ['--fault-health', 'not_ready'] });
    const router = await startTestRouter(
      { replicas: [{ name: 'fresh', host: '127.0.0.1', port: sim.port }], health: { fall: 5 } },
      ['--health-interval', '60'],
      { ROUTER_ADMIN_TOKEN: TEST_TOKEN },
    );
    try {
      const list = await adminCall(router, 'GET', '/replicas');
      assert.equal(list.status, 200);
      const view = (list.body.replicas as Array<{ name: string; ready: boolean; state: string; kind: string }>)[0];
      assert.deepEqual([view.name, view.kind, view.ready, view.state], ['fresh', 'static', true, 'ready']);
      assert.equal((await simRequest(`${router.url}/readyz`)).status, 200);
      assert.equal((await health(router)).body.replicas_ready, 1);
      const r = await post(router);
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-replica-name'], 'fresh');
      assert.equal(
        router.logs().some((l) => l['event'] === 'ready' && l['replica'] === 'fresh'),
        false,
        'promoted by the poller',
      );
    } finally {
      await router.close();
    }
  });

  it('demotes a replica whose /health answers 503 after fall polls, routes nothing to it, and promotes it after rise', async () => {
    const sick = await spawnSim({ name: 'sick' });
    const well = await spawnSim({ name: 'well' });
    const router = await startTestRouter(
      { replicas: [sick, well].map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })), health: { fall: 2, rise: 2 } },
      ['--health-interval', '0.1'],
    );
    try {
      await sick.setFaults({ health: 'not_ready' });
      await waitFor(async () => (await ready(router, 'sick')) === false, 10_000, 'sick to be demoted');
      const before = (await sick.stats()).requests;
      for (let i = 0; i < 6; i++) assert.equal((await post(router, { 'x-session-id': `n${i}` })).headers['x-replica-name'], 'well');
      assert.equal((await sick.stats()).requests, before);
      await sick.setFaults({ health: 'ok' });
      await waitFor(async () => (await ready(router, 'sick')) === true, 10_000, 'sick to be promoted');
      const names = new Set<string>();
      for (let i = 0; i < 4; i++) names.add(String((await post(router, { 'x-session-id': `m${i}` })).headers['x-replica-name']));
      assert.ok(names.has('sick'));
    } finally {
      await router.close();
    }
  });

  it('needs fall consecutive failures: one bad poll does not demote', async () => {
    const flaky = await spawnSim({ name: 'flaky' });
    const router = await startTestRouter({ replicas: [{ name: 'flaky', host: '127.0.0.1', port: flaky.port }], health: { fall: 3, rise: 1 } }, [
      '--health-interval',
      '0.1',
    ]);
    try {
      await flaky.setFaults({ health: 'not_ready' });
      // wait until a failed poll has been recorded, then heal before the third
      const replica = router.app.get(RegistryService).get('flaky')!;
      await waitFor(() => replica.health.failures >= 1, 10_000, 'one failed poll');
      await flaky.setFaults({ health: 'ok' });
      await waitFor(() => replica.health.failures === 0, 10_000, 'a good poll');
      assert.equal(replica.ready, true);
    } finally {
      await router.close();
    }
  });

  it('never demotes for 4xx answers', async () => {
    const sim = await spawnSim({ name: 'strict' });
    const router = await startTestRouter({ replicas: [{ name: 'strict', host: '127.0.0.1', port: sim.port }], health: { fall: 1 } }, [
      '--health-interval',
      '60',
    ]);
    try {
      for (let i = 0; i < 5; i++) {
        const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', body: Buffer.from('{not json') });
        assert.equal(r.status, 400);
      }
      assert.equal(await ready(router, 'strict'), true);
    } finally {
      await router.close();
    }
  });

  it('counts a 5xx as one health failure', async () => {
    const sim = await spawnSim({ name: 'err' });
    const router = await startTestRouter({ replicas: [{ name: 'err', host: '127.0.0.1', port: sim.port }], health: { fall: 2 } }, ['--health-interval', '60']);
    try {
      await sim.setFaults({ status: 500 });
      assert.equal((await post(router)).status, 500);
      assert.equal(await ready(router, 'err'), true);
      assert.equal((await post(router)).status, 500);
      assert.equal(await ready(router, 'err'), false);
    } finally {
      await router.close();
    }
  });

  it('with every replica down answers 503 no_replica_available with Retry-After and X-Session-Id at once, without queueing', async () => {
    const sim = await spawnSim({ name: 'down' });
    const router = await startTestRouter({ replicas: [{ name: 'down', host: '127.0.0.1', port: sim.port }], health: { fall: 1 } }, [
      '--health-interval',
      '0.1',
      '--queue-timeout',
      '30',
    ]);
    /** Requests that left the admission queue, any way (its wait histogram counts each once). */
    const queued = async (): Promise<number> =>
      sum(parseProm((await simRequest(`${router.url}/metrics`)).body.toString()).samples, 'affinity_router_queue_wait_seconds_count');
    try {
      await sim.setFaults({ health: 'not_ready' });
      await waitFor(async () => (await health(router)).status === 503, 10_000, '/health to turn 503');
      const h = await health(router);
      assert.equal(h.body.status, 'no_replicas');
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        const r = await post(router, { 'x-session-id': 'lonely', 'x-request-id': `lonely-${i}` });
        const took = performance.now() - t0;
        assert.equal(r.status, 503);
        // At once (contract: < 100 ms): never held in the 30 s admission queue. The bound is far below
        // the queue timeout rather than at 100 ms, which a loaded 2-core runner can overshoot.
        assert.ok(took < 5_000, `took ${took} ms`);
        assert.equal(r.headers['retry-after'], '1');
        // The router headers of contract §3: no replica was chosen, the decision is `none`.
        assert.equal(r.headers['x-session-id'], 'lonely');
        assert.equal(r.headers['x-request-id'], `lonely-${i}`);
        assert.equal(r.headers['x-router-affinity'], 'none');
        assert.equal(r.headers['x-router-replica'], undefined);
        assert.equal(r.headers['content-type'], 'application/json');
        const e = JSON.parse(r.body.toString()) as Record<string, string>;
        assert.deepEqual([e['object'], e['type'], e['code']], ['error', 'service_unavailable', 'no_replica_available']);
        assert.equal(typeof e['message'], 'string');
      }
      assert.equal((await health(router)).body['rejected'], 5);
      assert.equal(await queued(), 0, 'no request entered the admission queue');
    } finally {
      await router.close();
    }
  });

  it('GET /health has the pypto-compatible body', async () => {
    const sim = await spawnSim({ name: 'h0' });
    const router = await startTestRouter({ replicas: [{ name: 'h0', host: '127.0.0.1', port: sim.port }] });
    try {
      await post(router, { 'x-session-id': 'a' });
      await post(router, { 'x-session-id': 'a' });
      const h = await health(router);
      assert.equal(h.status, 200);
      assert.deepEqual(Object.keys(h.body).sort(), [
        'affinity_hits',
        'queued',
        'rejected',
        'replicas',
        'replicas_ready',
        'replicas_total',
        'routed',
        'sessions',
        'status',
      ]);
      assert.deepEqual(
        { ...h.body, replicas: undefined },
        { status: 'ok', replicas_ready: 1, replicas_total: 1, sessions: 1, routed: 2, affinity_hits: 1, rejected: 0, queued: 0, replicas: undefined },
      );
      assert.deepEqual(h.body.replicas[0], { name: 'h0', url: `http://127.0.0.1:${sim.port}`, ready: true, draining: false, outstanding: 0, routed: 2 });
      const live = await simRequest(`${router.url}/livez`);
      assert.equal(live.status, 200);
      const rz = await simRequest(`${router.url}/readyz`);
      assert.equal(rz.status, 200);
    } finally {
      await router.close();
    }
  });
});
