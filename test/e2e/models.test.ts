/** Several models and LoRA adapters in one fleet (contract §4.3, issue 16), with simulator processes. */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { freePort, simRequest, spawnSim, stopAllSims, type SimProcess, type SimResponse } from '../support/sim-process.js';
import { simHost } from '../support/fleet.js';
import { parseProm, sum } from '../support/prom.js';

type Json = Record<string, unknown>;
const ADMIN = { ROUTER_ADMIN_TOKEN: TEST_TOKEN };

function chat(router: TestRouter, model: string | undefined, content: string, session?: string): Promise<SimResponse> {
  const body = JSON.stringify({ ...(model === undefined ? {} : { model }), max_tokens: 2, messages: [{ role: 'user', content }] });
  return simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', body, headers: session === undefined ? {} : { 'x-session-id': session } });
}

const json = (r: SimResponse): Json => JSON.parse(r.body.toString()) as Json;
const servedBy = (r: SimResponse): string => String(r.headers['x-replica-name']);

/** Resolves once GET /replicas shows every listed replica with exactly these models. */
async function modelsKnown(router: TestRouter, want: Record<string, string[]>, timeoutMs = 5_000): Promise<void> {
  await waitFor(
    async () => {
      const list = (await adminCall(router, 'GET', '/replicas')).body as { replicas: Array<{ name: string; models: string[] | null }> };
      return Object.entries(want).every(([name, models]) => {
        const got = list.replicas.find((r) => r.name === name)?.models;
        return got !== null && got !== undefined && [...got].sort().join() === [...models].sort().join();
      });
    },
    timeoutMs,
    `model lists ${JSON.stringify(want)}`,
  );
}

describe('routing by model (contract §4.3)', () => {
  let router: TestRouter;
  const sims: Record<string, SimProcess> = {};
  const requests = async (): Promise<Record<string, number>> =>
    Object.fromEntries(await Promise.all(Object.entries(sims).map(async ([n, s]) => [n, (await s.stats()).requests] as const)));

  before(async () => {
    [sims.A, sims.B, sims.C] = await Promise.all([
      spawnSim({ name: 'A', args: ['--model', 'm1'] }),
      spawnSim({ name: 'B', args: ['--model', 'm2', '--lora', 'lora-b'] }),
      spawnSim({ name: 'C', args: ['--model', 'm2'] }),
    ]);
    const replicas = Object.entries(sims).map(([name, s]) => ({ name, host: '127.0.0.1', port: s.port }));
    router = await startTestRouter({ replicas }, [], ADMIN);
    await modelsKnown(router, { A: ['m1'], B: ['m2', 'lora-b'], C: ['m2'] });
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  it('sends 12 requests of each model only to replicas serving it', async () => {
    const before = await requests();
    const seen: Record<string, Set<string>> = { m1: new Set(), m2: new Set() };
    for (let i = 0; i < 12; i++) {
      for (const model of ['m1', 'm2']) {
        const r = await chat(router, model, `question ${i} about ${model}`);
        assert.equal(r.status, 200, r.body.toString());
        assert.equal(json(r).model, model);
        seen[model].add(servedBy(r));
      }
    }
    assert.deepEqual([...seen.m1], ['A']);
    assert.deepEqual([...seen.m2].sort(), ['B', 'C'], 'm2 is balanced over both of its replicas');
    const now = await requests();
    assert.equal(now.A - before.A, 12);
    assert.equal(now.B - before.B + (now.C - before.C), 12);
  });

  it('lists the union of the replicas models once each at GET /v1/models, LoRA parent kept', async () => {
    const r = await simRequest(`${router.url}/v1/models?limit=10`);
    assert.equal(r.status, 200);
    const body = json(r) as { object: string; data: Array<{ id: string; parent?: string | null }> };
    assert.equal(body.object, 'list');
    assert.deepEqual(body.data.map((m) => m.id).sort(), ['lora-b', 'm1', 'm2']);
    assert.equal(body.data.find((m) => m.id === 'lora-b')?.parent, 'm2');
  });

  it('answers 404 model_not_found for a model no replica serves, forwarding nothing', async () => {
    const before = await requests();
    const r = await chat(router, 'no-such-model', 'hello', 'sess-404');
    assert.equal(r.status, 404);
    assert.match(String(r.headers['content-type']), /^application\/json/);
    assert.equal(r.headers['x-session-id'], 'sess-404');
    const body = json(r);
    assert.equal(body.object, 'error');
    assert.equal(body.type, 'invalid_request_error');
    assert.equal(body.code, 'model_not_found');
    assert.match(String(body.message), /"no-such-model"/);
    assert.deepEqual(await requests(), before);
  });

  it('moves a session pinned to A to a replica serving the model it asks for, and back', async () => {
    const first = await chat(router, 'm1', 'turn one', 'sess-switch');
    assert.equal(servedBy(first), 'A');
    const second = await chat(router, 'm2', 'turn two', 'sess-switch');
    assert.equal(second.status, 200);
    assert.ok(['B', 'C'].includes(servedBy(second)), servedBy(second));
    assert.equal(second.headers['x-router-affinity'], 'switch;reason=model');
    const third = await chat(router, 'm1', 'turn three', 'sess-switch');
    assert.equal(servedBy(third), 'A');
    assert.equal(third.headers['x-router-affinity'], 'switch;reason=model');
    const fourth = await chat(router, 'm1', 'turn four', 'sess-switch');
    assert.equal(fourth.headers['x-router-affinity'], 'retain');
  });

  it('routes requests without a model to any replica, as before', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 6; i++) seen.add(servedBy(await chat(router, undefined, `no model ${i}`)));
    assert.deepEqual([...seen].sort(), ['A', 'B', 'C']);
  });

  it('routes a LoRA adapter only to the replica listing it; 503 naming it once that replica is drained', async () => {
    for (let i = 0; i < 6; i++) {
      const r = await chat(router, 'lora-b', `adapter ${i}`);
      assert.equal(r.status, 200);
      assert.equal(servedBy(r), 'B');
    }
    assert.equal((await adminCall(router, 'PATCH', '/replicas/B', { body: { draining: true } })).status, 200);
    try {
      const before = await requests();
      const r = await chat(router, 'lora-b', 'adapter after drain', 'sess-lora');
      assert.equal(r.status, 503);
      assert.equal(r.headers['retry-after'], '1');
      assert.equal(r.headers['x-session-id'], 'sess-lora');
      const body = json(r);
      assert.equal(body.code, 'no_replica_available');
      assert.match(String(body.message), /"lora-b"/);
      assert.deepEqual(await requests(), before);
      // The base model still has C.
      assert.equal(servedBy(await chat(router, 'm2', 'base model while B drains')), 'C');
    } finally {
      await adminCall(router, 'PATCH', '/replicas/B', { body: { draining: false } });
    }
  });

  it('labels request metrics with the model the fleet lists, and counts ready replicas per model', async () => {
    const { samples } = parseProm((await simRequest(`${router.url}/metrics`)).body.toString());
    const requests = (model: string): number => sum(samples, 'affinity_router_requests_total', { route: '/v1/chat/completions', model });
    assert.ok(requests('m1') >= 12 && requests('m2') >= 12 && requests('lora-b') >= 6, JSON.stringify([requests('m1'), requests('m2')]));
    assert.ok(requests('none') >= 6);
    assert.equal(requests('no-such-model'), 0, 'a model no replica lists is never a label value');
    assert.ok(requests('unknown') >= 1);
    const ready = (model: string): number => sum(samples, 'affinity_router_model_replicas_ready', { model });
    assert.deepEqual([ready('m1'), ready('m2'), ready('lora-b')], [1, 2, 1]);
  });
});

describe('model discovery keeps up with replicas (contract §4.3)', () => {
  after(stopAllSims);

  it('re-discovers a replica restarted with another model within two refresh periods', async () => {
    const refreshS = 1;
    const port = await freePort();
    const first = await spawnSim({ name: 'D', port, args: ['--model', 'm3'] });
    // Health probes too rare to see the restart: only the periodic refresh can find the new model.
    const flags = ['--models-refresh', String(refreshS), '--health-interval', '60'];
    const router = await startTestRouter({ replicas: [{ name: 'D', host: '127.0.0.1', port }] }, flags, ADMIN);
    try {
      await modelsKnown(router, { D: ['m3'] });
      assert.equal((await chat(router, 'm4', 'before restart')).status, 404);
      await first.kill();
      await spawnSim({ name: 'D', port, args: ['--model', 'm4'] });
      const restarted = performance.now();
      // Two refresh periods, plus one models timeout of the probe's own and scheduling slack.
      await modelsKnown(router, { D: ['m4'] }, 2 * refreshS * 1000 + 2_000);
      const took = performance.now() - restarted;
      const r = await chat(router, 'm4', 'after restart');
      assert.equal(r.status, 200, `${r.body.toString()} (re-discovered after ${Math.round(took)} ms)`);
      assert.equal((await chat(router, 'm3', 'old model')).status, 404);
    } finally {
      await router.close();
    }
  });

  it('keeps the models a static replica declares and never asks it', async () => {
    const sim = await spawnSim({ name: 'E', args: ['--model', 'm5'] });
    const router = await startTestRouter({ replicas: [{ name: 'E', host: '127.0.0.1', port: sim.port, models: ['m5', 'declared-only'] }] }, [], ADMIN);
    try {
      await modelsKnown(router, { E: ['m5', 'declared-only'] });
      assert.equal(servedBy(await chat(router, 'm5', 'declared')), 'E');
      assert.equal((await chat(router, 'm6', 'not declared')).status, 404);
    } finally {
      await router.close();
    }
  });
});

describe('launch by model (contract §4.3, §8)', () => {
  let router: TestRouter;
  before(async () => {
    const hosts = [simHost('h1', [0], 19_610, [], { model: 'm1' }), simHost('h2', [0, 1], 19_620, [], { model: 'm2' })];
    router = await startTestRouter({ hosts }, ['--initial-replicas', '0'], ADMIN);
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  it('launches on a host serving the model, and 404 for a model no host serves', async () => {
    const launched = await adminCall(router, 'POST', '/replicas', { body: { model: 'm2' } });
    assert.equal(launched.status, 202, JSON.stringify(launched.body));
    assert.equal(launched.body.name, 'h2-d0');
    await waitFor(async () => (await chat(router, 'm2', 'to the launched replica')).status === 200, 15_000, 'the launched m2 replica');
    assert.equal(servedBy(await chat(router, 'm2', 'again')), 'h2-d0');

    const refused = await adminCall(router, 'POST', '/replicas', { body: { model: 'nope' } });
    assert.equal(refused.status, 404);
    assert.match(String(refused.headers['content-type']), /^application\/problem\+json/);
    assert.match(String(refused.body.detail), /'nope'/);

    const fleet = (await adminCall(router, 'GET', '/fleet')).body as { models: Array<Json> };
    assert.deepEqual(fleet.models, [
      { model: 'm1', hosts: ['h1'], slots: 1, free_slots: ['h1-d0'], replicas: 0, routable: 0 },
      { model: 'm2', hosts: ['h2'], slots: 2, free_slots: ['h2-d1'], replicas: 1, routable: 1 },
    ]);
  });
});
