/**
 * Bounded model lists (issue 26 item 5), against real simulator processes: one replica whose
 * `/v1/models` is ~57 MB and one whose list is garbage from the start, beside a good one.
 * `GET /v1/models` is served from what discovery read (no per-call fan-out, so the 57 MB list is
 * never fetched for a client), both bad replicas are logged once and shown in a gauge, and after
 * `--models-grace` they take only requests that name no model.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSim, simRequest, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { startTestRouter, waitFor, type TestRouter } from '../support/router.js';
import { parseProm } from '../support/prom.js';

describe('model lists are bounded, and a replica whose list cannot be read is said so (issue 26)', () => {
  let sims: SimProcess[];
  let router: TestRouter;
  const unreadable = async (): Promise<Record<string, number>> => {
    const { samples } = parseProm((await simRequest(`${router.url}/metrics`)).body.toString());
    return Object.fromEntries(samples.filter((s) => s.name === 'affinity_router_replica_models_unreadable').map((s) => [s.labels['replica'], s.value]));
  };
  const chat = (session: string, model?: string) =>
    simRequest(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'x-session-id': session },
      body: Buffer.from(JSON.stringify({ ...(model !== undefined ? { model } : {}), messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 })),
    });

  before(async () => {
    sims = await Promise.all(['good', 'huge', 'junk'].map((name) => spawnSim({ name })));
    await sims[1].setFaults({ models_list: 'huge' });
    await sims[2].setFaults({ models_list: 'garbage' });
    router = await startTestRouter({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })) }, [
      '--models-grace',
      '1',
      '--models-refresh',
      '0.3',
      // The byte cap, not the clock, must end the huge list's read, even on a machine busy with other tests.
      '--models-timeout',
      '30',
    ]);
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  it('logs each unreadable list once and shows it in affinity_router_replica_models_unreadable', async () => {
    await waitFor(
      async () => {
        const g = await unreadable();
        return g['good'] === 0 && g['huge'] === 1 && g['junk'] === 1;
      },
      45_000,
      'the gauge',
    );
    // several refreshes later, still one line each
    await waitFor(() => router.logs().filter((l) => l['event'] === 'models_grace_over').length === 2, 15_000, 'the grace to end for both');
    const lines = router.logs().filter((l) => l['event'] === 'models_unreadable');
    assert.deepEqual(lines.map((l) => l['replica']).sort(), ['huge', 'junk']);
    assert.match(String(lines.find((l) => l['replica'] === 'huge')?.['reason']), /over --models-max-bytes/);
    assert.match(String(lines.find((l) => l['replica'] === 'junk')?.['reason']), /not an OpenAI model list/);
  });

  it('answers GET /v1/models from the discovered lists, without asking a replica per call', async () => {
    const asked = async () => (await Promise.all(sims.map((s) => s.stats()))).reduce((n, s) => n + s.requests, 0);
    const before = await asked();
    const answers = await Promise.all(Array.from({ length: 8 }, () => simRequest(`${router.url}/v1/models`)));
    for (const r of answers) {
      assert.equal(r.status, 200);
      const ids = (JSON.parse(r.body.toString()) as { data: Array<{ id: string }> }).data.map((m) => m.id);
      assert.deepEqual(ids, ['sim-model']);
    }
    assert.equal(await asked(), before, 'no replica was asked for its list by a client call');
  });

  it('after --models-grace, a replica whose list was never readable takes only requests that name no model', async () => {
    const named = new Set<string>();
    for (let i = 0; i < 24; i++) {
      const r = await chat(`named-${i}`, 'sim-model');
      assert.equal(r.status, 200);
      named.add(String(r.headers['x-replica-name']));
    }
    assert.deepEqual([...named], ['good'], 'requests naming a model go where it is listed');
    const unnamed = new Set<string>();
    for (let i = 0; i < 24; i++) unnamed.add(String((await chat(`plain-${i}`)).headers['x-replica-name']));
    assert.ok(unnamed.has('huge') || unnamed.has('junk'), `model-less requests still use them: ${[...unnamed].join(',')}`);
  });
});
