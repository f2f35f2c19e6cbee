import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSim, simRequest, simStream, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { startTestRouter, waitFor, type TestRouter } from '../support/router.js';
import { parseProm, sum } from '../support/prom.js';

const chat = (extra: Record<string, unknown> = {}) => Buffer.from(JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra }));
const scrape = async (router: TestRouter) => parseProm((await simRequest(`${router.url}/metrics`)).body.toString());

describe('metrics (SPEC §9)', () => {
  let sims: SimProcess[];
  let router: TestRouter;
  before(async () => {
    sims = await Promise.all(['m0', 'm1', 'm2'].map((name) => spawnSim({ name })));
    router = await startTestRouter({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })) });
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  it('counts 100 requests over 3 replicas per replica and status, with 100 overhead observations per phase', async () => {
    const sent = new Map<string, number>();
    for (let i = 0; i < 100; i++) {
      const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': `m-${i % 30}` }, body: chat() });
      assert.equal(r.status, 200);
      const n = String(r.headers['x-replica-name']);
      sent.set(n, (sent.get(n) ?? 0) + 1);
    }
    const { samples, problems } = await scrape(router);
    assert.deepEqual(problems, []);
    for (const s of sims) {
      assert.equal(sum(samples, 'affinity_router_requests_total', { replica: s.name, status: '200', route: '/v1/chat/completions' }), sent.get(s.name) ?? 0, s.name);
      assert.equal(sum(samples, 'affinity_router_replica_inflight', { replica: s.name }), 0);
      assert.equal((await s.stats()).requests, sent.get(s.name) ?? 0);
    }
    assert.equal(sum(samples, 'affinity_router_requests_total', { decision: 'retain' }), 70);
    assert.equal(sum(samples, 'affinity_router_requests_total', { decision: 'initialize' }), 30);
    assert.equal(sum(samples, 'affinity_router_overhead_seconds_count', { phase: 'request' }), 100);
    assert.equal(sum(samples, 'affinity_router_overhead_seconds_count', { phase: 'response' }), 100);
    assert.equal(sum(samples, 'affinity_router_requests_received_total'), 100);
    assert.equal(sum(samples, 'affinity_router_request_terminations_total', { cause: 'ok' }), 100);
    assert.equal(sum(samples, 'affinity_router_sessions'), 30);
    assert.ok(sum(samples, 'process_resident_memory_bytes') > 0, 'default process metrics on');
    assert.ok(sum(samples, 'affinity_router_health_checks_total', { result: 'ok' }) > 0);
    const text = (await simRequest(`${router.url}/metrics`)).body.toString();
    assert.equal(/m-\d+/.test(text), false, 'no session id in /metrics');
  });
});

describe('accounting invariant under mixed outcomes', () => {
  after(stopAllSims);

  it('received = Σ termination causes, in-flight back to 0, each cause in the log', async () => {
    const good = await spawnSim({ name: 'ok', args: ['--itl-ms', '30'] });
    const bad = await spawnSim({ name: 'bad', args: ['--itl-ms', '30'] });
    const router = await startTestRouter(
      { replicas: [good, bad].map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })), health: { fall: 100 } },
      ['--request-timeout', '0.5', '--health-interval', '60'],
    );
    try {
      const to = (replica: string) => (replica === 'ok' ? good : bad);
      // pin two sessions, one per replica
      const a = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': 'A' }, body: chat() });
      const b = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': 'B' }, body: chat() });
      const sBad = a.headers['x-replica-name'] === 'bad' ? 'A' : 'B';
      assert.equal(to(String(b.headers['x-replica-name'])).name !== to(String(a.headers['x-replica-name'])).name, true);
      let sent = 2;
      // ok x5
      for (let i = 0; i < 5; i++, sent++) await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', body: chat() });
      // client aborts x3
      for (let i = 0; i < 3; i++, sent++) {
        const s = await simStream(`${router.url}/v1/chat/completions`, { body: chat({ stream: true, max_tokens: 100 }).toString() });
        await s.waitForEvents(1);
        s.destroy();
      }
      // upstream error: reset mid-stream x2
      await bad.setFaults({ reset_after_chunks: 2 });
      for (let i = 0; i < 2; i++, sent++) {
        const s = await simStream(`${router.url}/v1/chat/completions`, { headers: { 'x-session-id': sBad }, body: chat({ stream: true, max_tokens: 10 }).toString() });
        await s.done;
      }
      // timeouts x2
      await bad.setFaults({ reset: true, hang: 'headers' });
      for (let i = 0; i < 2; i++, sent++) {
        const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': sBad }, body: chat() });
        assert.equal(r.status, 504);
      }
      // rejected: body too large x1 (max body default 64MiB: use a declared length)
      await bad.setFaults({ reset: true });
      // no replica x2
      await good.setFaults({ health: 'not_ready' });
      await bad.setFaults({ health: 'not_ready' });
      const reg = router.app.get((await import('../../src/modules/registry/registry.service.js')).RegistryService);
      for (const r of reg.list) r.ready = false;
      for (let i = 0; i < 2; i++, sent++) {
        const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', body: chat() });
        assert.equal(r.status, 503);
      }
      await waitFor(async () => {
        const { samples } = await scrape(router);
        return sum(samples, 'affinity_router_requests_received_total') === sent && sum(samples, 'affinity_router_request_terminations_total') === sent;
      }, 3_000, 'every request accounted');
      const { samples } = await scrape(router);
      const causes = Object.fromEntries(['ok', 'client_abort', 'upstream_error', 'upstream_timeout', 'no_replica'].map((c) => [c, sum(samples, 'affinity_router_request_terminations_total', { cause: c })]));
      assert.deepEqual(causes, { ok: 7, client_abort: 3, upstream_error: 2, upstream_timeout: 2, no_replica: 2 });
      assert.equal(sum(samples, 'affinity_router_replica_inflight'), 0);
      const logged = router.logs().filter((l) => l['event'] === 'request');
      assert.equal(logged.length, sent);
      for (const c of Object.keys(causes)) assert.ok(logged.some((l) => l['cause'] === c), `cause ${c} logged`);
      assert.ok(logged.every((l) => typeof l['reqId'] === 'string' && typeof l['duration_ms'] === 'number'));
    } finally {
      await router.close();
    }
  });
});
