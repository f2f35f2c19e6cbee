import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { simRequest, simStream, spawnSim, stopAllSims, type SimStream } from '../support/sim-process.js';
import { startTestRouter, waitFor } from '../support/router.js';

/** Streams held open at once: more than an engine's default batch (vLLM `--max-num-seqs` 256). */
const STREAMS = 500;

const body = (tokens: number, stream: boolean): string =>
  JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: tokens, stream });

describe('a busy replica (contract §3: probes have connections of their own, no hidden cap)', () => {
  after(stopAllSims);

  it('stays ready with 500 ten-second streams in flight, and a new request still gets through at once', async () => {
    // 50 tokens 200 ms apart: each stream lasts ~10 s (2,500 chunks/s through the router).
    const sim = await spawnSim({ name: 'busy', args: ['--itl-ms', '200'] });
    // Default data-plane settings; the test router polls health every 0.2 s with a 1 s timeout,
    // so a probe stuck behind client traffic would demote the replica within the streams' life.
    const router = await startTestRouter({ replicas: [{ name: 'busy', host: '127.0.0.1', port: sim.port }] });
    const streams: SimStream[] = [];
    try {
      const opened = await Promise.all(
        Array.from({ length: STREAMS }, (_, i) =>
          simStream(`${router.url}/v1/chat/completions`, { headers: { 'x-session-id': `s${i}` }, body: body(50, true) }),
        ),
      );
      streams.push(...opened);
      // Every stream reached the replica: none is parked in a connection pool.
      await waitFor(async () => (await sim.stats()).running >= STREAMS, 30_000, `${STREAMS} streams running on the replica`);
      assert.equal(router.outstanding('busy'), STREAMS);

      // While they run: /health answers 200 with the replica ready, and a new request completes fast.
      const healthChecks: number[] = [];
      const newRequestMs: number[] = [];
      const allDone = Promise.all(streams.map((s) => s.done));
      let finished = false;
      allDone.then(
        () => (finished = true),
        () => (finished = true),
      );
      while (!finished && healthChecks.length < 20) {
        const h = await simRequest(`${router.url}/health`);
        healthChecks.push(h.status);
        const view = JSON.parse(h.body.toString()) as { replicas: Array<{ name: string; ready: boolean }> };
        assert.equal(h.status, 200, `router /health answered ${h.status} with ${STREAMS} streams in flight: ${h.body.toString()}`);
        assert.equal(view.replicas[0]?.ready, true);
        const t0 = performance.now();
        const r = await simRequest(`${router.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: body(1, false),
        });
        newRequestMs.push(performance.now() - t0);
        assert.equal(r.status, 200, r.body.toString());
        assert.equal(r.headers['x-replica-name'], 'busy');
      }
      // A new request is forwarded at once, not parked behind the streams: within 1 s (the median
      // of the tries, so one stall of a loaded 2-core runner does not decide it).
      const median = [...newRequestMs].sort((x, y) => x - y)[Math.floor(newRequestMs.length / 2)];
      assert.ok(median < 1_000, `new requests took ${newRequestMs.map(Math.round).join(', ')} ms with ${STREAMS} streams in flight`);
      assert.ok(healthChecks.length >= 3, `only ${healthChecks.length} health checks ran while the streams were open`);
      const ends = await allDone;
      assert.equal(ends.filter((e) => e === 'end').length, STREAMS);
      assert.equal(streams.filter((s) => s.events.at(-1)?.data === '[DONE]').length, STREAMS);
      const demoted = router.logs().filter((l) => l['event'] === 'unready');
      assert.deepEqual(demoted, []);
    } finally {
      for (const s of streams) s.destroy();
      await router.close();
    }
  });
});
