import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { simRequest, simStream, spawnSim, stopAllSims, type SimProcess, type SimStream } from '../support/sim-process.js';
import { startTestRouter, waitFor, type TestRouter } from '../support/router.js';
import { parseProm, sum } from '../support/prom.js';

const chat = (stream: boolean, tokens: number): string =>
  JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: tokens, stream });

const post = (router: TestRouter, session: string) =>
  simRequest(`${router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: chat(false, 1),
    timeoutMs: 60_000,
  });

const queued = async (router: TestRouter): Promise<number> =>
  (JSON.parse((await simRequest(`${router.url}/health`)).body.toString()) as { queued: number }).queued;

/** Two streams that hold both places of a `max_inflight: 2` replica until they are destroyed. */
async function fill(router: TestRouter, sim: SimProcess, name: string): Promise<SimStream[]> {
  const long = await Promise.all(
    ['long-a', 'long-b'].map((s) => simStream(`${router.url}/v1/chat/completions`, { headers: { 'x-session-id': s }, body: chat(true, 2_000) })),
  );
  await waitFor(() => router.outstanding(name) === 2, 10_000, 'both places taken');
  await waitFor(async () => (await sim.stats()).running === 2, 10_000, 'both streams running on the replica');
  return long;
}

describe('admission control: max_inflight and the router queue (contract §3)', () => {
  after(stopAllSims);

  it('queues past max_inflight in order, refuses past --queue-max at once, forgets a client that left, and serves the rest once places free', async () => {
    // 2,000 tokens 20 ms apart: the two long streams hold their places until the test ends them.
    const sim = await spawnSim({ name: 'capped', args: ['--itl-ms', '20'] });
    const router = await startTestRouter({ replicas: [{ name: 'capped', host: '127.0.0.1', port: sim.port, max_inflight: 2 }] }, ['--queue-max', '3']);
    try {
      const long = await fill(router, sim, 'capped');
      // The queued requests are long streams too: each holds the place it gets, so the order in
      // which places go to them is seen one place at a time (a stream resolves on its headers).
      const open = (session: string) => simStream(`${router.url}/v1/chat/completions`, { headers: { 'x-session-id': session }, body: chat(true, 2_000) });
      const a = open('wait-a');
      await waitFor(async () => (await queued(router)) === 1, 10_000, 'a queued');
      const b = open('wait-b');
      await waitFor(async () => (await queued(router)) === 2, 10_000, 'b queued');

      // A client that leaves while queued: removed, never sent, its place freed.
      const gone = http.request(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-session-id': 'gone' },
      });
      gone.on('error', () => undefined);
      gone.end(chat(false, 1));
      await waitFor(async () => (await queued(router)) === 3, 10_000, 'the leaving client queued');
      gone.destroy();
      await waitFor(async () => (await queued(router)) === 2, 10_000, 'the leaving client removed from the queue');

      const c = open('wait-c');
      await waitFor(async () => (await queued(router)) === 3, 10_000, 'c queued');
      // The queue holds --queue-max requests: the next one is refused at once.
      const refused = await post(router, 'refused');
      assert.equal(refused.status, 503);
      assert.equal(refused.headers['retry-after'], '1');
      const err = JSON.parse(refused.body.toString()) as { code: string; type: string; message: string };
      assert.equal(err.code, 'overloaded');
      assert.equal(err.type, 'service_unavailable');
      assert.match(err.message, /queue is full \(3 requests\)/);

      // Queued requests count in /health, but in no replica's outstanding; the replica saw none of them.
      const health = JSON.parse((await simRequest(`${router.url}/health`)).body.toString()) as { queued: number; replicas: Array<{ outstanding: number }> };
      assert.equal(health.queued, 3);
      assert.equal(health.replicas[0].outstanding, 2);
      const before = await sim.stats();
      assert.equal(before.requests, 2);
      const metrics = parseProm((await simRequest(`${router.url}/metrics`)).body.toString()).samples;
      assert.equal(sum(metrics, 'affinity_router_queue_depth'), 3);
      assert.equal(sum(metrics, 'affinity_router_queue_wait_seconds_count', { outcome: 'abandoned' }), 1);

      // Places free one at a time and go to the queue's head: a, then b, then c.
      const seen = async () =>
        Object.keys((await sim.stats()).by_session)
          .filter((k) => k.startsWith('wait-'))
          .sort();
      long[0].destroy();
      const sa = await a;
      assert.equal(sa.status, 200);
      assert.equal(sa.headers['x-router-replica'], 'capped');
      assert.deepEqual(await seen(), ['wait-a']);
      assert.equal(await queued(router), 2);
      long[1].destroy();
      const sb = await b;
      assert.equal(sb.status, 200);
      assert.deepEqual(await seen(), ['wait-a', 'wait-b']);
      assert.equal(await queued(router), 1);
      sa.destroy();
      const sc = await c;
      assert.equal(sc.status, 200);
      assert.deepEqual(await seen(), ['wait-a', 'wait-b', 'wait-c']);
      sb.destroy();
      sc.destroy();
      const stats = await sim.stats();
      assert.equal(stats.by_session['gone'], undefined, 'the client that left was sent to the replica');
      assert.equal(stats.by_session['refused'], undefined);
      assert.equal(stats.by_session['wait-a'], 1);
      assert.equal(await queued(router), 0);
      const after = parseProm((await simRequest(`${router.url}/metrics`)).body.toString()).samples;
      assert.equal(sum(after, 'affinity_router_queue_wait_seconds_count', { outcome: 'dispatched' }), 3);
    } finally {
      await router.close();
    }
  });

  it('turns a request that waited --queue-timeout into 503 overloaded with Retry-After, never sent', async () => {
    const sim = await spawnSim({ name: 'slow', args: ['--itl-ms', '20'] });
    const router = await startTestRouter({ replicas: [{ name: 'slow', host: '127.0.0.1', port: sim.port, max_inflight: 2 }] }, ['--queue-timeout', '1']);
    try {
      const long = await fill(router, sim, 'slow');
      const t0 = performance.now();
      const r = await post(router, 'times-out');
      const waited = performance.now() - t0;
      assert.equal(r.status, 503);
      assert.equal(r.headers['retry-after'], '1');
      assert.equal((JSON.parse(r.body.toString()) as { code: string }).code, 'overloaded');
      assert.ok(waited >= 900, `answered after ${Math.round(waited)} ms, before the 1 s queue timeout`);
      assert.equal((await sim.stats()).by_session['times-out'], undefined);
      assert.equal(await queued(router), 0);
      for (const s of long) s.destroy();
    } finally {
      await router.close();
    }
  });

  it('answers queued requests 503 shutting_down with Connection: close when the router shuts down', async () => {
    const sim = await spawnSim({ name: 'closing', args: ['--itl-ms', '20'] });
    const router = await startTestRouter({ replicas: [{ name: 'closing', host: '127.0.0.1', port: sim.port, max_inflight: 2 }] }, ['--drain-timeout', '2']);
    const long = await fill(router, sim, 'closing');
    const waiting = post(router, 'at-shutdown');
    await waitFor(async () => (await queued(router)) === 1, 10_000, 'queued');
    const closing = router.close();
    const r = await waiting;
    assert.equal(r.status, 503);
    assert.equal(r.headers['connection'], 'close');
    assert.equal((JSON.parse(r.body.toString()) as { code: string }).code, 'shutting_down');
    for (const s of long) s.destroy();
    await closing;
    assert.equal((await sim.stats()).by_session['at-shutdown'], undefined);
  });
});
