import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { simRequest, simStream, stopAllSims, type SimProcess, type SimResponse, type SimStream } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { spawnOneSlow } from '../support/slow-fleet.js';
import { parseProm, sum } from '../support/prom.js';

/**
 * Warm hand-off (routing.warm_handoff, docs/design.md §6.2): r2 is 4x slower. Once the router has
 * measured that, and while r0 and r1 each have two long streams in flight (a quarter of their
 * declared batch: busy enough to hand off), a new conversation's home by in-flight counts is r2
 * but expected wait serves its first turn on a fast replica. Seen
 * from outside: which replica answered each turn, the decision header, the cached tokens the
 * simulator reports, the copies it counted apart (`x-router-warm`), and the router's counter.
 */
const SIM_ARGS = ['--itl-ms', '10', '--ttft-base-ms', '10', '--block-size', '4', '--kv-blocks', '4000'];
const FAST = new Set(['r0', 'r1']);
const BATCH = 8;
/** Streams held on each fast replica: a quarter of the batch, what makes a replica busy enough to hand off (warm-handoff.ts). */
const HELD = BATCH / 4;

const words = (tag: string, n: number): string => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');

/** A header of the client's that the home replica must see on the warm copy too (an engine's API key, say). */
const CLIENT_AUTH = 'Bearer warm-client-key';

// Once by one process and once through two worker processes, whose primary sends the copy.
for (const workers of [1, 2])
  describe(`warm hand-off: a new conversation answered fast, living on a slower replica (${workers} worker${workers > 1 ? 's' : ''})`, () => {
    let sims: SimProcess[];
    let router: TestRouter;
    let holds: SimStream[] = [];

    before(async () => {
      const { replicas, ...fleet } = await spawnOneSlow(SIM_ARGS);
      sims = fleet.sims;
      // max_inflight declared (the batch): expected wait (1 + in flight / 8) × slowness, and hand-off once the serving replica has 2 in flight.
      const declared = replicas.map((r) => ({ ...r, max_inflight: BATCH }));
      const flags = workers > 1 ? ['--workers', String(workers)] : [];
      router = await startTestRouter({ replicas: declared, routing: { warm_handoff: true } }, flags, { ROUTER_ADMIN_TOKEN: TEST_TOKEN });
      await learnSpeeds(router);
    });
    after(async () => {
      for (const h of holds) h.destroy();
      await router?.close();
      await stopAllSims();
    });

    const chat = (messages: Array<{ role: string; content: string }>, session?: string): Promise<SimResponse> =>
      simRequest(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: CLIENT_AUTH, ...(session === undefined ? {} : { 'x-session-id': session }) },
        body: JSON.stringify({ model: 'sim-model', messages, max_tokens: 4 }),
        timeoutMs: 30_000,
      });
    const warmCopies = async (): Promise<number> => (await sims[2].stats()).cache.warm.requests;
    const copies = async (result: string): Promise<number> =>
      sum(parseProm((await simRequest(`${router.url}/metrics`)).body.toString()).samples, 'affinity_router_warm_copies_total', { replica: 'r2', result });

    /** Long streams in flight on each fast replica (pinned there by hand): busy, and in-flight counts favour r2. */
    async function holdFastReplicas(tag: string): Promise<void> {
      for (const h of holds) h.destroy();
      holds = [];
      await waitFor(() => router.outstanding('r0') === 0 && router.outstanding('r1') === 0, 5_000, 'the earlier holds to end');
      for (const name of FAST) {
        for (let k = 0; k < HELD; k++) {
          const session = `hold-${tag}-${name}-${k}`;
          assert.equal((await adminCall(router, 'PUT', `/sessions/${session}`, { body: { replica: name } })).status, 200);
          const body = JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hold' }], max_tokens: 3000, stream: true });
          const h = await simStream(`${router.url}/v1/chat/completions`, { headers: { 'x-session-id': session }, body });
          assert.equal(h.headers['x-replica-name'], name);
          holds.push(h);
        }
      }
      await waitFor(() => router.outstanding('r0') === HELD && router.outstanding('r1') === HELD, 5_000, `${HELD} streams in flight on r0 and on r1`);
    }

    for (const withId of [true, false]) {
      it(`${withId ? 'with a session id' : 'without a session id (prefix)'}: the first turn on a fast replica, the later turns cached on the slow home`, async () => {
        await holdFastReplicas(withId ? 'id' : 'prefix');
        const before = { warm: await warmCopies(), ok: await copies('ok') };
        const session = withId ? `warm-${Date.now()}` : undefined;
        const turn1 = [
          { role: 'system', content: words(withId ? 'sys' : 'other', 60) },
          { role: 'user', content: words('q', 20) },
        ];
        const first = await chat(turn1, session);
        assert.equal(first.status, 200, first.body.toString());
        assert.ok(FAST.has(String(first.headers['x-replica-name'])), `first turn answered by ${String(first.headers['x-replica-name'])}`);
        assert.equal(first.headers['x-router-affinity'], 'initialize');
        await waitFor(async () => (await copies('ok')) > before.ok, 10_000, 'the warm copy to r2 to end ok');
        assert.equal(await warmCopies(), before.warm + 1, 'r2 saw exactly one copy, counted apart from client prompts');
        const copy = (await sims[2].stats()).last_request;
        assert.equal(copy?.headers['x-router-warm'], '1');
        assert.equal(copy?.headers['authorization'], CLIENT_AUTH, "the copy carries the client's headers");
        const log = router.logs().find((l) => l.event === 'request' && l.reqId === first.headers['x-request-id']);
        assert.equal(log?.home, 'r2', JSON.stringify(log));

        const turn2 = [...turn1, { role: 'assistant', content: 'a b c d' }, { role: 'user', content: words('next', 10) }];
        const second = await chat(turn2, session);
        assert.equal(second.status, 200, second.body.toString());
        assert.equal(second.headers['x-replica-name'], 'r2');
        assert.equal(second.headers['x-router-affinity'], withId ? 'retain' : 'prefix');
        const usage = (JSON.parse(second.body.toString()) as { usage: { prompt_tokens_details: { cached_tokens: number } } }).usage;
        assert.ok(usage.prompt_tokens_details.cached_tokens >= 80, `r2 had the first turn's prompt cached: ${JSON.stringify(usage)}`);
      });
    }

    it('hands nothing off while the fast replicas are not busy: the conversation lives where it was answered', async () => {
      for (const h of holds) h.destroy();
      holds = [];
      await waitFor(() => router.outstanding('r0') === 0 && router.outstanding('r1') === 0, 5_000, 'the holds to end');
      const warmBefore = await warmCopies();
      const session = `idle-${Date.now()}`;
      const turn1 = [{ role: 'user', content: words('idle', 80) }];
      const first = await chat(turn1, session);
      const served = String(first.headers['x-replica-name']);
      assert.ok(FAST.has(served), served);
      const second = await chat([...turn1, { role: 'assistant', content: 'a b' }, { role: 'user', content: 'more' }], session);
      assert.equal(second.headers['x-replica-name'], served);
      assert.equal(second.headers['x-router-affinity'], 'retain');
      assert.equal(await warmCopies(), warmBefore, 'no copy was sent');
    });

    it('a copy that fails pins the conversation back to the replica that answered, which has it cached', async () => {
      await holdFastReplicas('fail');
      await sims[2].setFaults({ status: 500 });
      try {
        const failedBefore = await copies('failed');
        const session = `warm-fail-${Date.now()}`;
        const turn1 = [{ role: 'user', content: words('f', 80) }];
        const first = await chat(turn1, session);
        assert.equal(first.status, 200, first.body.toString());
        const served = String(first.headers['x-replica-name']);
        assert.ok(FAST.has(served), served);
        await waitFor(async () => (await copies('failed')) > failedBefore, 10_000, 'the warm copy to r2 to fail');
        await router.waitForLog((l) => l.event === 'warm_copy_failed' && l.replica === 'r2' && l.served === served);
        const second = await chat([...turn1, { role: 'assistant', content: 'a b' }, { role: 'user', content: 'more' }], session);
        assert.equal(second.headers['x-replica-name'], served);
        assert.equal(second.headers['x-router-affinity'], 'retain');
      } finally {
        await sims[2].setFaults({ status: null });
      }
    });
  });

/** Ten answers from each replica, pinned there by hand, until the router measures r2 as slower (8 make an estimate; 4x without a queue). */
async function learnSpeeds(router: TestRouter): Promise<void> {
  await Promise.all(
    ['r0', 'r1', 'r2'].map(async (name) => {
      const session = `learn-${name}`;
      assert.equal((await adminCall(router, 'PUT', `/sessions/${session}`, { body: { replica: name } })).status, 200);
      for (let i = 0; i < 10; i++) {
        const r = await simRequest(`${router.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-session-id': session },
          body: JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: `learn ${name} ${i}` }], max_tokens: 6 }),
          timeoutMs: 30_000,
        });
        assert.equal(r.status, 200, r.body.toString());
        assert.equal(r.headers['x-replica-name'], name);
      }
    }),
  );
  // The tests hold 2 of 8 on each fast replica: a new one then waits 1.25 there, and r2 must look slower than that.
  let seen = 0;
  await waitFor(
    async () => {
      const { body } = await adminCall(router, 'GET', '/replicas');
      seen = (body.replicas as Array<{ name: string; speed: { slowness: number } }>).find((r) => r.name === 'r2')!.speed.slowness;
      return seen > 2;
    },
    10_000,
    'the router to measure r2 as more than 2x slower',
  ).catch((err: Error) => assert.fail(`${err.message}; r2's slowness read ${seen}`));
}
