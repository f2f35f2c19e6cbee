/**
 * Issue 13 item 8, short variant of bench scenario (w): a production-shaped mix through the router
 * process (multi-turn conversations with the id in the header, in the body or absent, 300 streams
 * open at once plus Poisson arrivals of new conversations, engine-like pacing with jitter, 5% of
 * streams dropped by their client mid-stream). Everything is checked from outside: the streams,
 * the router's /health polled throughout, its /metrics and log, and the simulators' own counters.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { sum } from '../support/prom.js';
import { waitFor, writeTempConfig } from '../support/router.js';
import { spawnSim, stopAllSims, type SimStats } from '../support/sim-process.js';
import { runProductionLoad, type ProductionLoadResult } from '../../bench/production-load.js';
import { Poller } from '../../bench/production-watch.js';
import { scrapeMetrics, startQuietRouter, type QuietRouter } from './load.js';

const STREAMS = 300;
/** 30 ± 10 ms between tokens, TTFT 20 ms + 0.1 ms per uncached prompt token, an engine-sized batch. */
const SIM_ARGS = ['--ttft-base-ms', '20', '--prefill-ms-per-token', '0.1', '--itl-ms', '30', '--itl-jitter-ms', '10', '--max-running', '256'];

describe('production-shaped load, short (issue 13 item 8)', () => {
  let router: QuietRouter | undefined;
  after(async () => {
    await router?.stop();
    await stopAllSims();
  });

  it('300 concurrent streams with ids in header, body or none and client aborts: every stream ends with [DONE] or a counted abort, /health 200 throughout, no demotion, every count agrees', async (t) => {
    const sims = await Promise.all(['prod0', 'prod1'].map((name) => spawnSim({ name, args: SIM_ARGS })));
    const cfg = writeTempConfig({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })) });
    // Probes every 0.5 s (default 2 s timeout, 2 failures to demote): ~20 chances per replica to demote it wrongly.
    router = await startQuietRouter(['--config', cfg, '--health-interval', '0.5']);
    const r = router;
    // One kept-alive connection polled every 0.2 s: the router's answer, not the accept queue a
    // loaded machine makes new connections wait in (bench scenario w measures that with fresh ones).
    const health = new Poller(`${r.url}/health`, {
      intervalMs: 200,
      timeoutMs: 10_000,
      keepAlive: true,
      judge: (body) => {
        const h = JSON.parse(body) as { replicas_ready?: number; replicas_total?: number };
        return h.replicas_ready === 2 && h.replicas_total === 2 ? null : `replicas_ready ${String(h.replicas_ready)} of ${String(h.replicas_total)}`;
      },
    });
    let load: ProductionLoadResult;
    try {
      load = await runProductionLoad({
        url: r.url,
        streams: STREAMS,
        newSessionsPerS: 5,
        // A busy Node server accepts one connection per event-loop turn (libuv ≥ 1.45): clients
        // arrive at ~40/s, not in one burst that would queue /health behind them.
        rampMs: 8_000,
        durationMs: 8_000,
        seed: 8,
        sessionIdShare: 0.6,
        abortShare: 0.05,
        turns: [1, 4],
        systemWords: [20, 300],
        userWords: [5, 30],
        outputTokens: [16, 48],
        idleTimeoutMs: 30_000,
      });
    } finally {
      await health.stop();
    }
    const summary = JSON.stringify({ ...load, ttftMs: undefined, gapMs: undefined });
    t.diagnostic(`load: ${summary}`);

    // The mix happened: every id mode, aborts, Poisson arrivals, 300 streams open at once.
    assert.ok(load.peakOpen >= STREAMS, `${STREAMS} streams open at once: ${summary}`);
    assert.ok(load.byIdMode.header > 0 && load.byIdMode.body > 0 && load.byIdMode.none > 0, `ids in header, body and none: ${summary}`);
    assert.ok(load.aborted > 0 && load.conversations.poisson > 0, `client aborts and Poisson sessions: ${summary}`);
    // Every stream ended with [DONE] or was dropped by its client.
    assert.equal(load.errors, 0, `errors: ${summary}`);
    assert.equal(load.completed + load.aborted, load.sent, summary);

    assert.ok(health.polls > 0, '/health was polled during the load');
    assert.deepEqual(health.problems, [], `/health answered 200 with both replicas ready in ${health.polls - health.bad}/${health.polls} polls`);

    // Counts settle once the router has destroyed the upstream of every dropped stream.
    const settled = async (): Promise<{ m: Awaited<ReturnType<typeof scrapeMetrics>>; stats: SimStats[] } | undefined> => {
      const m = await scrapeMetrics(r.url);
      const stats = await Promise.all(sims.map((s) => s.stats()));
      const quiet = sum(m, 'affinity_router_replica_inflight') === 0 && stats.every((s) => s.inflight === 0);
      return quiet && sum(m, 'affinity_router_requests_received_total') === sum(m, 'affinity_router_request_terminations_total') ? { m, stats } : undefined;
    };
    const { m, stats } = await waitFor(settled, 15_000, 'router and simulators to have nothing in flight');
    const cause = (c: string): number => sum(m, 'affinity_router_request_terminations_total', { cause: c });
    const simTotal = (f: (s: SimStats) => number): number => stats.reduce((n, s) => n + f(s), 0);
    assert.equal(sum(m, 'affinity_router_requests_received_total'), load.sent, 'the router received every request sent');
    assert.equal(cause('ok'), load.completed, 'router: ok = completed streams');
    assert.equal(cause('client_abort'), load.aborted, 'router: client_abort = streams the client dropped');
    assert.equal(sum(m, 'affinity_router_request_terminations_total'), load.sent, 'router: no other termination cause');
    assert.equal(
      simTotal((s) => s.requests),
      load.sent,
      'each request reached exactly one replica once',
    );
    assert.equal(
      simTotal((s) => s.completed),
      load.completed,
      'replicas: completed = completed streams',
    );
    assert.equal(
      simTotal((s) => s.aborted),
      load.aborted,
      'replicas: every dropped stream was stopped upstream',
    );
    assert.equal(
      simTotal((s) => s.resets),
      0,
    );

    // No replica was demoted: no failed probe, both ready, no `unready` transition logged.
    assert.ok(sum(m, 'affinity_router_health_checks_total', { result: 'ok' }) > 0, 'probes ran during the load');
    assert.equal(sum(m, 'affinity_router_health_checks_total', { result: 'fail' }), 0, 'no probe failed');
    for (const s of sims) assert.equal(sum(m, 'affinity_router_replica_state', { replica: s.name, state: 'ready' }), 1, `${s.name} is ready`);
    const demotions = readFileSync(r.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes('"event":"unready"'));
    assert.deepEqual(demotions, [], 'no replica was demoted');
  });
});
