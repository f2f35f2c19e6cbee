import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSim, simRequest, simStream, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { startTestRouter, waitFor, type TestRouter } from '../support/router.js';
import { parseProm, sum } from '../support/prom.js';
import { MetricsService } from '../../src/modules/metrics/metrics.service.js';
import { METRIC_NAMES } from './metric-names.js';

const chat = (extra: Record<string, unknown> = {}) =>
  Buffer.from(JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra }));
const scrape = async (router: TestRouter) => parseProm((await simRequest(`${router.url}/metrics`)).body.toString());

describe('metrics (contract §9)', () => {
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
      assert.equal(
        sum(samples, 'affinity_router_requests_total', { replica: s.name, status: '200', route: '/v1/chat/completions' }),
        sent.get(s.name) ?? 0,
        s.name,
      );
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
    const res = await simRequest(`${router.url}/metrics`);
    assert.equal(res.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8', 'the Prometheus text format');
    assert.equal(/m-\d+/.test(res.body.toString()), false, 'no session id in /metrics');
  });

  it('registers exactly the documented metric names and label sets (dashboards depend on them)', () => {
    const metrics = router.app.get(MetricsService).registry.getMetricsAsArray() as unknown as Array<{ name: string; labelNames?: readonly string[] }>;
    const seen = metrics.map((m) => `${m.name}{${[...(m.labelNames ?? [])].sort().join(',')}}`).sort();
    assert.deepEqual(seen, [...METRIC_NAMES].sort());
  });
});

describe('accounting invariant under mixed outcomes', () => {
  after(stopAllSims);

  it('received = Σ termination causes, in-flight back to 0, each cause in the log', async () => {
    const good = await spawnSim({ name: 'ok', args: ['--itl-ms', '30'] });
    const bad = await spawnSim({ name: 'bad', args: ['--itl-ms', '30'] });
    const router = await startTestRouter({ replicas: [good, bad].map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })), health: { fall: 100 } }, [
      '--request-timeout',
      '0.5',
      '--health-interval',
      '60',
      '--max-body',
      '1MiB',
    ]);
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
        const s = await simStream(`${router.url}/v1/chat/completions`, {
          headers: { 'x-session-id': sBad },
          body: chat({ stream: true, max_tokens: 10 }).toString(),
        });
        await s.done;
      }
      // timeouts x2
      await bad.setFaults({ reset: true, hang: 'headers' });
      for (let i = 0; i < 2; i++, sent++) {
        const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': sBad }, body: chat() });
        assert.equal(r.status, 504);
      }
      // rejected: body over --max-body x1
      await bad.setFaults({ reset: true });
      const big = await simRequest(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'x-session-id': 'big' },
        body: Buffer.alloc(2 * 1024 * 1024, 0x20),
      });
      assert.equal(big.status, 413);
      sent++;
      // no replica x2
      await good.setFaults({ health: 'not_ready' });
      await bad.setFaults({ health: 'not_ready' });
      const reg = router.app.get((await import('../../src/modules/registry/registry.service.js')).RegistryService);
      for (const r of reg.list) r.health.setReady(false);
      for (let i = 0; i < 2; i++, sent++) {
        const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', body: chat() });
        assert.equal(r.status, 503);
      }
      await waitFor(
        async () => {
          const { samples } = await scrape(router);
          return sum(samples, 'affinity_router_requests_received_total') === sent && sum(samples, 'affinity_router_request_terminations_total') === sent;
        },
        10_000,
        'every request accounted',
      );
      const { samples, problems } = await scrape(router);
      assert.deepEqual(problems, [], 'the scrape after every kind of outcome lints clean');
      const expected = { ok: 7, client_abort: 3, upstream_error: 2, upstream_timeout: 2, no_replica: 2, rejected: 1 };
      const causes = Object.fromEntries(Object.keys(expected).map((c) => [c, sum(samples, 'affinity_router_request_terminations_total', { cause: c })]));
      assert.deepEqual(causes, expected);
      assert.equal(sum(samples, 'affinity_router_replica_inflight'), 0);
      // By status, as the client saw it: the aborted and the broken streams had their 200 already.
      const byStatus = (status: string) => sum(samples, 'affinity_router_requests_total', { status });
      assert.deepEqual({ 200: byStatus('200'), 503: byStatus('503'), 504: byStatus('504'), 413: byStatus('413') }, { 200: 7 + 3 + 2, 503: 2, 504: 2, 413: 1 });
      // The log has one line per request, and the same count per cause as the metrics.
      const logged = router.logs().filter((l) => l['event'] === 'request');
      assert.equal(logged.length, sent);
      const loggedCauses = Object.fromEntries(Object.keys(expected).map((c) => [c, logged.filter((l) => l['cause'] === c).length]));
      assert.deepEqual(loggedCauses, expected);
      for (const l of logged) {
        assert.equal(typeof l['reqId'], 'string');
        assert.equal(typeof l['session'], 'string', `session on ${JSON.stringify(l)}`);
        assert.equal(typeof l['decision'], 'string');
        assert.equal(typeof l['status'], 'number');
        assert.equal(typeof l['bytes_in'], 'number');
        assert.equal(typeof l['bytes_out'], 'number');
        assert.equal(typeof l['duration_ms'], 'number');
      }
      const line = (cause: string) => logged.find((l) => l['cause'] === cause)!;
      assert.equal(line('rejected')['status'], 413);
      assert.equal(line('rejected')['replica'], undefined, 'a rejected body reached no replica');
      assert.equal(line('no_replica')['status'], 503);
      assert.equal(line('upstream_timeout')['status'], 504);
      assert.equal(line('upstream_timeout')['replica'], 'bad');
      assert.equal(line('client_abort')['status'], 200);
      const okLine = logged.find((l) => l['cause'] === 'ok' && l['session'] === 'A')!;
      assert.equal(okLine['status'], 200);
      assert.equal(okLine['replica'], String(a.headers['x-replica-name']));
      assert.equal(okLine['decision'], 'initialize');
      assert.equal(okLine['bytes_in'], chat().length);
      assert.equal(okLine['bytes_out'], a.body.length);
      assert.equal(typeof okLine['ttfb_ms'], 'number');
      assert.ok((okLine['ttfb_ms'] as number) <= (okLine['duration_ms'] as number));
    } finally {
      await router.close();
    }
  });
});

describe('stream timing, directory evictions and quiet health probes', () => {
  let sim: SimProcess;
  let router: TestRouter;
  before(async () => {
    sim = await spawnSim({ name: 'plain', args: ['--itl-ms', '10'] });
    router = await startTestRouter({ replicas: [{ name: sim.name, host: '127.0.0.1', port: sim.port }] });
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  it("relays a stream's headers before the first token, so the response overhead excludes prefill", async () => {
    // An engine's prefill: headers at once, the first token PREFILL_MS later. Each bound below is
    // half the prefill, so a loaded runner's scheduling delays cannot decide the test.
    const PREFILL_MS = 1_500;
    const half = PREFILL_MS / 2;
    const slow = await spawnSim({ name: 'slow-prefill', args: ['--ttft-base-ms', String(PREFILL_MS), '--itl-ms', '10'] });
    const r = await startTestRouter({ replicas: [{ name: slow.name, host: '127.0.0.1', port: slow.port }] });
    try {
      const t0 = performance.now();
      const s = await simStream(`${r.url}/v1/chat/completions`, {
        headers: { 'x-session-id': 'prefill' },
        body: chat({ stream: true, max_tokens: 5 }).toString(),
      });
      const headersAt = performance.now() - t0;
      assert.equal(s.status, 200);
      assert.equal(await s.done, 'end');
      const firstTokenAt = s.events[0].at - t0;
      assert.ok(firstTokenAt >= PREFILL_MS - 20, `first token after prefill (${firstTokenAt.toFixed(0)} ms)`);
      assert.ok(firstTokenAt - headersAt >= half, `headers ${headersAt.toFixed(0)} ms, first token ${firstTokenAt.toFixed(0)} ms: headers were not held back`);
      const { samples } = await scrape(r);
      const overhead = sum(samples, 'affinity_router_overhead_seconds_sum', { phase: 'response' });
      assert.equal(sum(samples, 'affinity_router_overhead_seconds_count', { phase: 'response' }), 1);
      assert.ok(overhead < half / 1000, `response overhead ${overhead} s must not include the replica's ${PREFILL_MS} ms prefill`);
      assert.equal(sum(samples, 'affinity_router_stream_first_chunk_seconds_count'), 1);
      assert.ok(sum(samples, 'affinity_router_stream_first_chunk_seconds_sum') >= (PREFILL_MS - 20) / 1000, 'time to first token includes prefill');
      assert.ok(sum(samples, 'affinity_router_stream_chunk_gap_seconds_count') >= 5, 'a gap per chunk after the first');
      const line = await r.waitForLog((l) => l['event'] === 'request' && l['session'] === 'prefill');
      assert.equal(line['stream'], true);
      assert.ok((line['ttfb_ms'] as number) < half, `ttfb_ms ${line['ttfb_ms'] as number}: the headers are the first bytes`);
    } finally {
      await r.close();
    }
  });

  it('counts evictions by cause: lru over --max-sessions, ttl past --session-ttl', async () => {
    const small = await startTestRouter({ replicas: [{ name: sim.name, host: '127.0.0.1', port: sim.port }] }, ['--max-sessions', '2', '--session-ttl', '3']);
    try {
      const send = (id: string) => simRequest(`${small.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': id }, body: chat() });
      const evictions = async (cause: string) => sum((await scrape(small)).samples, 'affinity_router_session_evictions_total', { cause });
      for (const id of ['e1', 'e2', 'e3']) assert.equal((await send(id)).status, 200);
      assert.equal(await evictions('lru'), 1, 'the third session over a cap of 2 drops the oldest');
      assert.equal(await evictions('ttl'), 0);
      // Idle past the 3 s TTL (far longer than three requests take, even on a loaded runner), the two left are
      // swept (a scrape sweeps, as does the health tick).
      await waitFor(async () => (await evictions('ttl')) === 2, 15_000, 'two ttl evictions');
      assert.equal(await evictions('lru'), 1);
      assert.equal(sum((await scrape(small)).samples, 'affinity_router_sessions'), 0);
    } finally {
      await small.close();
    }
  });

  it('does not log health probes per tick', async () => {
    const checks = async () => sum((await scrape(router)).samples, 'affinity_router_health_checks_total');
    const c0 = await checks();
    await waitFor(async () => (await checks()) >= c0 + 5, 5_000, 'five more probes');
    const probeLines = router.logs().filter((l) => l['event'] !== 'request' && /health|probe/i.test(JSON.stringify(l)));
    assert.deepEqual(
      probeLines.filter((l) => l['event'] !== 'ready' && l['event'] !== 'unready'),
      [],
    );
  });
});
