/**
 * Issue 7, scenario 1: replica faults seen from the client. Complements test/e2e (refused
 * connection, die mid-stream, request/stream-idle timeouts, 503 demotion): here a reset in the
 * middle of a non-stream body, 500 answers relayed and demoted only after `fall`, a hang before
 * the headers of a stream request, and /health 503 `not_ready` under live sessions. In every case
 * the replica's in-flight count returns to 0.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request, type IncomingHttpHeaders } from 'node:http';
import { spawnSim, simRequest, simStream, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { RegistryService } from '../../src/modules/registry/registry.service.js';
import type { Replica } from '../../src/modules/registry/replica.js';
import { accounting } from './load.js';

const ENV = { ROUTER_ADMIN_TOKEN: TEST_TOKEN };
const chat = (extra: Record<string, unknown> = {}): Buffer =>
  Buffer.from(JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'tell me a long story' }], max_tokens: 64, ...extra }));

/** What a client saw, including a body cut short (which simRequest would only report as an error). */
interface Seen {
  status: number | null;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The response ended normally with all its bytes. */
  complete: boolean;
  error: string | null;
}

function send(url: string, headers: Record<string, string>, body: Buffer): Promise<Seen> {
  return new Promise((resolve) => {
    const seen: Seen = { status: null, headers: {}, body: Buffer.alloc(0), complete: false, error: null };
    const req = request(
      url,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': String(body.length), ...headers } },
      (res) => {
        seen.status = res.statusCode ?? 0;
        seen.headers = res.headers;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (e) => (seen.error = e.message));
        res.on('close', () => {
          seen.body = Buffer.concat(chunks);
          seen.complete = res.complete;
          resolve(seen);
        });
      },
    );
    req.on('error', (e) => {
      seen.error = e.message;
      resolve(seen);
    });
    req.setTimeout(15_000, () => req.destroy(new Error('no answer within 15 s')));
    req.end(body);
  });
}

const replicaOf = (router: TestRouter, name: string): Replica => router.app.get(RegistryService).get(name)!;
const pin = async (router: TestRouter, session: string, replica: string): Promise<void> => {
  const r = await adminCall(router, 'PUT', `/sessions/${session}`, { body: { replica } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
};

describe('replica faults (issue 7 §1)', () => {
  const routers: TestRouter[] = [];
  const start = async (sims: SimProcess[], flags: string[], health: Record<string, unknown> = {}): Promise<TestRouter> => {
    const r = await startTestRouter({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })), health }, flags, ENV);
    routers.push(r);
    // the first probes run at start with up to 500 ms jitter: a good one landing mid-test would reset the failure count
    const registry = r.app.get(RegistryService);
    await waitFor(() => sims.every((s) => registry.get(s.name)?.lastHealth !== null), 10_000, 'the first health probes');
    return r;
  };
  after(async () => {
    for (const r of routers) await r.close().catch(() => undefined);
    await stopAllSims();
  });

  it('a reset in the middle of a non-stream body reaches the client as a truncated body that never looks complete, is not replayed, and counts one health failure', async () => {
    const sim = await spawnSim({ name: 'resetter' });
    const router = await start([sim], ['--health-interval', '60'], { fall: 2 });
    await sim.setFaults({ reset_after_chunks: 0 });
    const seen = await send(`${router.url}/v1/chat/completions`, { 'x-session-id': 'cut' }, chat());
    const declared = Number(seen.headers['content-length']);
    assert.equal(seen.complete, false, `the client saw a complete response: ${JSON.stringify({ ...seen, body: seen.body.toString() })}`);
    if (seen.status !== null) {
      // headers were relayed: the body must be visibly short of its declared length
      assert.equal(seen.status, 200);
      assert.ok(Number.isInteger(declared) && seen.body.length < declared, `got ${seen.body.length} of ${declared} bytes`);
      assert.throws(() => JSON.parse(seen.body.toString()), 'the partial body does not parse');
    }
    await waitFor(() => router.outstanding('resetter') === 0, 10_000, 'in-flight back to 0');
    const st = await sim.stats();
    assert.equal(st.requests, 1, 'a request that reached the replica is never replayed');
    assert.equal(st.resets, 1);
    const r = replicaOf(router, 'resetter');
    assert.equal(r.health.failures, 1, 'the broken exchange counts as one health failure');
    assert.equal(r.ready, true, 'one failure is below fall=2');
    const acc = await accounting(router.url);
    assert.deepEqual([acc.received, acc.byCause['upstream_error'], acc.inflight], [1, 1, 0]);
  });

  it('a non-stream body that stalls halfway is cut at --request-timeout: short of its Content-Length, connection closed', async () => {
    const sim = await spawnSim({ name: 'staller' });
    const router = await start([sim], ['--health-interval', '60', '--request-timeout', '0.5']);
    await sim.setFaults({ hang: 'body' });
    const t0 = performance.now();
    const seen = await send(`${router.url}/v1/chat/completions`, { 'x-session-id': 'stall' }, chat());
    const took = performance.now() - t0;
    assert.equal(seen.status, 200, 'the headers were relayed before the stall');
    assert.equal(seen.complete, false, 'a stalled body never looks complete');
    assert.ok(seen.body.length < Number(seen.headers['content-length']), `got ${seen.body.length} of ${String(seen.headers['content-length'])} bytes`);
    assert.ok(took >= 450 && took < 5_000, `cut after ${Math.round(took)} ms`);
    await waitFor(() => router.outstanding('staller') === 0, 10_000, 'in-flight back to 0');
    await waitFor(async () => (await sim.stats()).aborted === 1, 10_000, 'the replica to see the upstream request destroyed');
    const acc = await accounting(router.url);
    assert.deepEqual([acc.byCause['upstream_timeout'], acc.inflight], [1, 0]);
  });

  it('relays a replica 500 as it is, never retries it, and demotes only after fall consecutive 500s', async () => {
    const err = await spawnSim({ name: 'err' });
    const ok = await spawnSim({ name: 'ok' });
    const router = await start([err, ok], ['--health-interval', '60'], { fall: 3 });
    await pin(router, 'S', 'err');
    await err.setFaults({ status: 500 });
    for (let i = 1; i <= 3; i++) {
      const seen = await send(`${router.url}/v1/chat/completions`, { 'x-session-id': 'S' }, chat());
      assert.equal(seen.status, 500);
      assert.equal(seen.complete, true);
      assert.equal(seen.headers['x-replica-name'], 'err', "the 500 is the replica's own answer");
      assert.equal(seen.headers['x-router-affinity'], 'retain');
      assert.equal((JSON.parse(seen.body.toString()) as { message: string }).message, 'simulated fault: status 500');
      assert.equal(replicaOf(router, 'err').ready, i < 3, `ready after ${i} of fall=3 failures`);
    }
    assert.equal((await err.stats()).requests, 3, 'each 500 reached the replica once');
    assert.equal((await ok.stats()).requests, 0, 'no 500 was retried on the other replica');
    const moved = await send(`${router.url}/v1/chat/completions`, { 'x-session-id': 'S' }, chat());
    assert.equal(moved.status, 200);
    assert.equal(moved.headers['x-replica-name'], 'ok');
    assert.equal(moved.headers['x-router-affinity'], 'switch;reason=unhealthy');
    assert.deepEqual([router.outstanding('err'), router.outstanding('ok')], [0, 0]);
  });

  it('answers a stream request whose replica hangs before headers with 504 after --request-timeout, frees the replica and does not demote it', async () => {
    const sim = await spawnSim({ name: 'mute' });
    const router = await start([sim], ['--health-interval', '60', '--request-timeout', '0.5', '--stream-idle-timeout', '30'], { fall: 1 });
    await sim.setFaults({ hang: 'headers' });
    const t0 = performance.now();
    const seen = await send(`${router.url}/v1/chat/completions`, { 'x-session-id': 'mute-1' }, chat({ stream: true }));
    const took = performance.now() - t0;
    assert.equal(seen.status, 504);
    assert.ok(took >= 450 && took < 5_000, `answered after ${Math.round(took)} ms`);
    const e = JSON.parse(seen.body.toString()) as Record<string, string>;
    assert.deepEqual([e['object'], e['type'], e['code']], ['error', 'timeout', 'replica_timeout']);
    assert.equal(seen.headers['x-session-id'], 'mute-1');
    await waitFor(() => router.outstanding('mute') === 0, 10_000, 'in-flight back to 0');
    await waitFor(async () => (await sim.stats()).aborted === 1, 10_000, 'the replica to see the upstream request destroyed');
    assert.equal(replicaOf(router, 'mute').ready, true, 'a timeout is not a health failure (fall=1)');
  });

  it('/health 503 not_ready: demoted after fall polls, the stream in flight still completes, the session moves once and stays, promotion after rise', async () => {
    const sick = await spawnSim({ name: 'sick', args: ['--itl-ms', '40'] });
    const well = await spawnSim({ name: 'well' });
    const router = await start([sick, well], ['--health-interval', '0.1'], { fall: 2, rise: 2 });
    await pin(router, 'S', 'sick');
    const s = await simStream(`${router.url}/v1/chat/completions`, {
      headers: { 'x-session-id': 'S' },
      body: chat({ stream: true, max_tokens: 40 }).toString(),
    });
    assert.equal(s.headers['x-replica-name'], 'sick');
    await s.waitForEvents(1);
    await sick.setFaults({ health: 'not_ready' });
    await waitFor(() => !replicaOf(router, 'sick').ready, 10_000, 'sick to be demoted');
    assert.ok((replicaOf(router, 'sick').lastHealth?.status ?? 0) === 503);
    const moved = await send(`${router.url}/v1/chat/completions`, { 'x-session-id': 'S' }, chat({ max_tokens: 2 }));
    assert.deepEqual([moved.status, moved.headers['x-replica-name'], moved.headers['x-router-affinity']], [200, 'well', 'switch;reason=unhealthy']);
    assert.equal(await s.done, 'end', 'demotion does not cut a stream in flight');
    assert.equal(s.events.at(-1)?.data, '[DONE]');
    await waitFor(() => router.outstanding('sick') === 0, 10_000, 'in-flight on sick back to 0');
    await sick.setFaults({ health: 'ok' });
    await waitFor(() => replicaOf(router, 'sick').ready, 10_000, 'sick to be promoted after rise=2');
    const stay = await send(`${router.url}/v1/chat/completions`, { 'x-session-id': 'S' }, chat({ max_tokens: 2 }));
    assert.deepEqual([stay.headers['x-replica-name'], stay.headers['x-router-affinity']], ['well', 'retain'], 'no ping-pong back to the recovered replica');
    const names = new Set<string>();
    for (let i = 0; i < 4; i++)
      names.add(
        String(
          (await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': `new-${i}` }, body: chat({ max_tokens: 1 }) }))
            .headers['x-replica-name'],
        ),
      );
    assert.ok(names.has('sick'), 'the promoted replica takes new sessions again');
    assert.deepEqual([router.outstanding('sick'), router.outstanding('well')], [0, 0]);
  });
});
