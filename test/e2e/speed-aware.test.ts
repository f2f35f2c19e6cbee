import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { simRequest, stopAllSims } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, type TestRouter } from '../support/router.js';
import { spawnOneSlow } from '../support/slow-fleet.js';
import { parseProm } from '../support/prom.js';

/**
 * Each simulator generates one completion at a time (`--max-running 1`): a queue, whose capacity is
 * its speed, so a slow replica's fair share of a saturating load is its speed share. r2 is 4x slower
 * than r0 and r1: speed share 0.25 / 2.25 ≈ 0.11. Both policies give it about that share (a busy
 * queue serves at its own pace); what speed awareness changes is how long requests wait there: raw
 * in-flight counts give it as many queued requests as a fast replica (each waiting ~4x as long),
 * expected wait gives it a shorter queue. Observed from the router's in-flight counts (timing
 * ratios are too noisy on a busy 2-core machine to assert on).
 */
const SIM_ARGS = ['--itl-ms', '10', '--ttft-base-ms', '10', '--max-running', '1'];
const SPEED_SHARE = 0.25 / 2.25;
const WORKERS = 12;
const PER_WORKER = 10;

interface Run {
  /** Requests each replica answered (by the simulator's own X-Replica-Name). */
  readonly count: Map<string, number>;
  /** Mean client latency (ms) of the requests each replica answered. */
  readonly meanMs: Map<string, number>;
  /** The slow replica's mean in-flight count over the fast ones' mean, sampled every 20 ms. */
  readonly queueRatio: number;
}

/** A closed loop of new conversations (a fresh session id per request): each one is a least-expected-wait choice. */
async function drive(router: TestRouter, tag: string, perWorker = PER_WORKER): Promise<Run> {
  const sums = new Map<string, number>();
  const count = new Map<string, number>();
  let slowQueue = 0;
  let fastQueue = 0;
  const sampler = setInterval(() => {
    slowQueue += router.outstanding('r2');
    fastQueue += (router.outstanding('r0') + router.outstanding('r1')) / 2;
  }, 20);
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      for (let i = 0; i < perWorker; i++) {
        const t0 = performance.now();
        const r = await simRequest(`${router.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-session-id': `${tag}-${w}-${i}` },
          body: JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: `question ${w} ${i}` }], max_tokens: 6 }),
          timeoutMs: 30_000,
        });
        assert.equal(r.status, 200, r.body.toString());
        const name = String(r.headers['x-replica-name']);
        sums.set(name, (sums.get(name) ?? 0) + performance.now() - t0);
        count.set(name, (count.get(name) ?? 0) + 1);
      }
    }),
  );
  clearInterval(sampler);
  return { count, meanMs: new Map([...sums].map(([k, v]) => [k, v / (count.get(k) ?? 1)])), queueRatio: slowQueue / fastQueue };
}

const share = (run: Run, name: string): number => (run.count.get(name) ?? 0) / [...run.count.values()].reduce((a, b) => a + b, 0);
/** Mean latency on the slow replica over the mean on the fast ones. */
const slowOverFast = (run: Run): number => (run.meanMs.get('r2') ?? NaN) / (((run.meanMs.get('r0') ?? NaN) + (run.meanMs.get('r1') ?? NaN)) / 2);
const describeRun = (run: Run): string =>
  JSON.stringify({
    count: Object.fromEntries(run.count),
    meanMs: Object.fromEntries([...run.meanMs].map(([k, v]) => [k, Math.round(v)])),
    queueRatio: Math.round(run.queueRatio * 100) / 100,
  });

describe('speed-aware load: one replica 4x slower (contract §4.2)', () => {
  let aware: TestRouter;
  let baseline: TestRouter;

  before(async () => {
    const { replicas } = await spawnOneSlow(SIM_ARGS);
    aware = await startTestRouter({ replicas }, [], { ROUTER_ADMIN_TOKEN: TEST_TOKEN });
    baseline = await startTestRouter({ replicas, routing: { speed_aware: false } }, [], { ROUTER_ADMIN_TOKEN: TEST_TOKEN });
  });
  after(async () => {
    await aware?.close();
    await baseline?.close();
    await stopAllSims();
  });

  it('gives the slow replica a share close to its speed share with a shorter queue than in-flight counts give it', async () => {
    // The baseline first, then the same load speed-aware, on the same simulators.
    const base = await drive(baseline, 'baseline');
    // Until a replica has 8 answers it counts as the median (cold start): let the estimate form first.
    await drive(aware, 'warm-up', 3);
    const run = await drive(aware, 'aware');
    const s = share(run, 'r2');
    assert.ok(s >= SPEED_SHARE * 0.5 && s <= SPEED_SHARE * 1.6, `slow share ${s.toFixed(3)} (speed share ${SPEED_SHARE.toFixed(3)}): ${describeRun(run)}`);
    // In-flight counts keep every replica's queue equal; expected wait keeps the slow one's short.
    const seen = `speed-aware ${describeRun(run)}, baseline ${describeRun(base)}, slow/fast latency ${slowOverFast(run).toFixed(2)} vs ${slowOverFast(base).toFixed(2)}`;
    assert.ok(base.queueRatio >= 0.75, seen);
    // Judged against the baseline of the same run (a fixed bound read 0.61 against 0.6 with another test beside it).
    assert.ok(run.queueRatio <= base.queueRatio * 0.7, seen);
  });

  it('shows the estimate per replica in GET /replicas and as gauges', async () => {
    const { status, body } = await adminCall(aware, 'GET', '/replicas');
    assert.equal(status, 200);
    const speed = Object.fromEntries(
      (body.replicas as Array<{ name: string; speed: { seconds_per_request: number | null; slowness: number } }>).map((r) => [r.name, r.speed]),
    );
    assert.deepEqual([speed.r0.slowness, speed.r1.slowness], [1, 1], JSON.stringify(speed));
    assert.ok(speed.r2.slowness > 1.5, JSON.stringify(speed));
    assert.ok(speed.r2.seconds_per_request! > speed.r0.seconds_per_request! * 1.5, JSON.stringify(speed));
    const samples = parseProm((await simRequest(`${aware.url}/metrics`)).body.toString()).samples;
    const gauge = (name: string, replica: string): number | undefined => samples.find((x) => x.name === name && x.labels.replica === replica)?.value;
    assert.equal(gauge('affinity_router_replica_slowness', 'r0'), 1);
    assert.ok((gauge('affinity_router_replica_slowness', 'r2') ?? 0) > 1.5);
    assert.ok((gauge('affinity_router_replica_request_seconds', 'r2') ?? 0) > 0);
  });

  it('with routing.speed_aware off (the baseline) keeps no estimate', async () => {
    const { body } = await adminCall(baseline, 'GET', '/replicas');
    for (const r of body.replicas as Array<{ speed: { seconds_per_request: number | null; slowness: number } }>) {
      assert.deepEqual(r.speed, { seconds_per_request: null, slowness: 1 });
    }
  });
});
