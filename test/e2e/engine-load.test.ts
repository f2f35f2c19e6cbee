import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { simRequest, spawnSim, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { startTestRouter, waitFor, type TestRouter } from '../support/router.js';
import { parseProm } from '../support/prom.js';

/**
 * Engine-reported load (issue 29 item 3): replicas configured with `engine` are scraped on their
 * probe connection, and load that did not come through the router (the simulator's
 * `external_waiting`) steers new conversations away. A replica whose metrics endpoint cannot be
 * read keeps serving on the router's own counts, said once in the log and in a gauge.
 */
describe('engine-reported load', () => {
  let sims: SimProcess[];
  let router: TestRouter;
  const chat = Buffer.from(JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }));
  const ask = async (session: string): Promise<string> => {
    const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': session }, body: chat });
    assert.equal(r.status, 200);
    return String(r.headers['x-replica-name']);
  };
  const gauges = async (name: string): Promise<Record<string, number>> => {
    const { samples } = parseProm((await simRequest(`${router.url}/metrics`)).body.toString());
    return Object.fromEntries(samples.filter((s) => s.name === name).map((s) => [s.labels['replica'], s.value]));
  };

  before(async () => {
    sims = await Promise.all(['busy', 'idle', 'm404', 'mjunk', 'mhang'].map((name) => spawnSim({ name })));
    const [busy, idle, m404, mjunk, mhang] = sims;
    await mhang.setFaults({ metrics_hang: true });
    router = await startTestRouter(
      {
        replicas: [
          { name: 'busy', host: '127.0.0.1', port: busy.port, engine: 'vllm' },
          { name: 'idle', host: '127.0.0.1', port: idle.port, engine: 'vllm' },
          { name: 'm404', host: '127.0.0.1', port: m404.port, metrics_path: '/no-metrics-here' },
          { name: 'mjunk', host: '127.0.0.1', port: mjunk.port, engine: 'sglang', metrics_path: '/health' },
          { name: 'mhang', host: '127.0.0.1', port: mhang.port, engine: 'vllm' },
        ],
      },
      ['--engine-metrics-interval', '0.2'],
    );
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  it('sends new conversations away from a replica whose engine reports 20 waiting requests the router did not send, and back once it is idle', async () => {
    await sims[0].setFaults({ external_waiting: 20 });
    await waitFor(async () => (await gauges('affinity_router_replica_foreign_load'))['busy'] === 20, 10_000, 'the external load to be read');
    const placed = [];
    for (let i = 0; i < 12; i++) placed.push(await ask(`ext-${i}`));
    assert.equal(placed.filter((r) => r === 'busy').length, 0, `no new conversation on the busy replica: ${placed.join(',')}`);
    await sims[0].setFaults({ external_waiting: 0 });
    await waitFor(async () => (await gauges('affinity_router_replica_foreign_load'))['busy'] === 0, 10_000, 'the external load to clear');
    const later = [];
    for (let i = 0; i < 12; i++) later.push(await ask(`later-${i}`));
    assert.ok(later.includes('busy'), `the replica takes new conversations again: ${later.join(',')}`);
  });

  it('a metrics endpoint that answers 404, no known gauges, or hangs: the replica keeps serving, one log line each, gauge 0', async () => {
    await waitFor(
      async () => {
        const up = await gauges('affinity_router_replica_engine_metrics_up');
        return up['m404'] === 0 && up['mjunk'] === 0 && up['mhang'] === 0 && up['busy'] === 1 && up['idle'] === 1;
      },
      10_000,
      'the engine-metrics gauge',
    );
    const served = new Set<string>();
    for (let i = 0; i < 24; i++) served.add(await ask(`bad-${i}`));
    assert.ok(served.has('m404') && served.has('mjunk') && served.has('mhang'), `replicas with unreadable metrics still serve: ${[...served].join(',')}`);
    const lines = router.logs().filter((l) => l['event'] === 'engine_metrics_unreadable');
    assert.deepEqual(lines.map((l) => l['replica']).sort(), ['m404', 'mhang', 'mjunk'], 'logged once per replica, not once per scrape');
    assert.ok(!router.logs().some((l) => l['event'] === 'unready' && l['replica'] === 'mhang'), 'a hanging metrics endpoint is not a failed health probe');
    assert.match(String(lines.find((l) => l['replica'] === 'm404')?.['reason']), /status 404/);
    assert.match(String(lines.find((l) => l['replica'] === 'mjunk')?.['reason']), /no sglang load gauges/);
  });
});
