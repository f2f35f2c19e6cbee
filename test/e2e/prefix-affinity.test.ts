import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSim, simRequest, simStream, stopAllSims, type SimProcess, type SimResponse, type SimStream } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { parseProm, sum } from '../support/prom.js';

interface Message {
  readonly role: string;
  readonly content: string;
}

/** Every conversation opens with the same short system prompt, as most apps do. */
const SYSTEM: Message = { role: 'system', content: 'You are a helpful assistant. Answer briefly.' };

/** The replica that really answered (the simulator's own header, not the router's). */
const replicaOf = (r: SimResponse | SimStream): string => String(r.headers['x-replica-name']);

/** A session-less multi-turn client like the OpenAI SDK: each turn re-sends the whole message list. */
class Conversation {
  readonly messages: Message[] = [SYSTEM];
  constructor(readonly n: number) {}

  async turn(url: string, headers: Record<string, string> = {}): Promise<SimResponse> {
    this.messages.push({
      role: 'user',
      content: `Conversation ${this.n}, question ${this.messages.length}: what about topic ${this.n * 7 + this.messages.length}?`,
    });
    const r = await simRequest(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: Buffer.from(JSON.stringify({ model: 'sim-model', messages: this.messages, max_tokens: 4 })),
    });
    assert.equal(r.status, 200, r.body.toString());
    const answer = (JSON.parse(r.body.toString()) as { choices: Array<{ message: Message }> }).choices[0].message;
    this.messages.push({ role: 'assistant', content: answer.content });
    return r;
  }
}

describe('prefix affinity for requests without a session id (contract §4.1)', () => {
  let sims: SimProcess[];
  let router: TestRouter;

  before(async () => {
    sims = await Promise.all(['r0', 'r1', 'r2'].map((name) => spawnSim({ name, args: ['--itl-ms', '2'] })));
    router = await startTestRouter({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })) }, ['--affinity-slack', '2'], {
      ROUTER_ADMIN_TOKEN: TEST_TOKEN,
    });
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  const metrics = async () => parseProm((await simRequest(`${router.url}/metrics`)).body.toString()).samples;

  it('keeps 30 five-turn conversations on one replica each, their first turns spread over all three', async () => {
    const convs = Array.from({ length: 30 }, (_, i) => new Conversation(i));
    const seen = convs.map(() => new Set<string>());
    const firsts = new Map<string, number>();
    const decisions = new Map<string, number>();
    for (let turn = 0; turn < 5; turn++) {
      // Turns interleave across conversations, as independent clients would.
      for (const [i, c] of convs.entries()) {
        const r = await c.turn(router.url);
        const name = replicaOf(r);
        seen[i].add(name);
        assert.match(String(r.headers['x-session-id']), /^[0-9a-f]{32}$/, 'a minted id is still returned');
        if (turn === 0) firsts.set(name, (firsts.get(name) ?? 0) + 1);
        const d = String(r.headers['x-router-affinity']);
        decisions.set(`${turn === 0 ? 'first' : 'later'} ${d}`, (decisions.get(`${turn === 0 ? 'first' : 'later'} ${d}`) ?? 0) + 1);
      }
    }
    const kept = seen.filter((s) => s.size === 1).length;
    assert.ok(kept >= 27, `${kept} of 30 conversations kept one replica (${JSON.stringify([...decisions])})`);
    assert.equal(firsts.size, 3, JSON.stringify([...firsts]));
    for (const [name, n] of firsts) assert.ok(n >= 5, `${name} got ${n} first turns`);
    // The shared system prompt alone does not pull new conversations together: first turns initialize.
    assert.equal(decisions.get('first initialize'), 30, JSON.stringify([...decisions]));
    assert.ok((decisions.get('later prefix') ?? 0) >= 27 * 4, JSON.stringify([...decisions]));

    const samples = await metrics();
    assert.ok(sum(samples, 'affinity_router_requests_total', { decision: 'prefix' }) >= 27 * 4);
    assert.equal(sum(samples, 'affinity_router_prefix_match_blocks_count'), 150);
    assert.ok(
      sum(samples, 'affinity_router_prefix_index_blocks') >= 1 + 30 * 9,
      'every turn recorded its blocks (one shared system block, nine per conversation)',
    );
    const line = router.logs().find((l) => l['event'] === 'request' && l['decision'] === 'prefix');
    assert.ok(line !== undefined, 'the request log line carries decision=prefix');
  });

  it('keeps a growing completions prompt on its replica', async () => {
    let prompt = 'Write a story about a lighthouse keeper. '.repeat(8); // > 1 block of 256 characters
    const seen = new Set<string>();
    for (let turn = 0; turn < 4; turn++) {
      const r = await simRequest(`${router.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: Buffer.from(JSON.stringify({ model: 'sim-model', prompt, max_tokens: 4 })),
      });
      assert.equal(r.status, 200);
      seen.add(replicaOf(r));
      if (turn > 0) assert.equal(r.headers['x-router-affinity'], 'prefix');
      prompt += ` Then chapter ${turn} continues with more and more of the keeper's long days by the sea.`;
    }
    assert.equal(seen.size, 1, [...seen].join());
  });

  it('a session id wins over any prefix, and its body is not read for one', async () => {
    const conv = new Conversation(100);
    const home = replicaOf(await conv.turn(router.url));
    const other = sims.map((s) => s.name).find((n) => n !== home)!;
    const put = await adminCall(router, 'PUT', '/sessions/sid-wins', { body: { replica: other } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    const before = sum(await metrics(), 'affinity_router_prefix_match_blocks_count');
    const byHeader = await conv.turn(router.url, { 'x-session-id': 'sid-wins' });
    assert.equal(replicaOf(byHeader), other);
    assert.equal(byHeader.headers['x-router-affinity'], 'retain');
    assert.equal(sum(await metrics(), 'affinity_router_prefix_match_blocks_count'), before, 'no prefix routing for a request with a session id');
    // Without the id the conversation goes back to where its prefix was last served.
    const back = await conv.turn(router.url);
    assert.equal(back.headers['x-router-affinity'], 'prefix');
    assert.equal(replicaOf(back), home);
  });

  it('puts new conversations sharing a long system prompt where it is cached, with or without a session id (issue 15 item 2)', async () => {
    // ~12 blocks of 256 characters: worth one request in flight (first-turn.ts), so on an idle fleet it wins over the rotation.
    const system = { role: 'system', content: 'You are the support agent of the Lighthouse Shipping Company. Policy follows. '.repeat(40) };
    const first = async (n: number, headers: Record<string, string> = {}): Promise<SimResponse> => {
      const r = await simRequest(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: Buffer.from(JSON.stringify({ model: 'sim-model', max_tokens: 2, messages: [system, { role: 'user', content: `customer ${n} asks` }] })),
      });
      assert.equal(r.status, 200, r.body.toString());
      assert.equal(r.headers['x-router-affinity'], 'initialize', 'a new conversation, not a kept one');
      return r;
    };
    const home = replicaOf(await first(0));
    for (let n = 1; n <= 3; n++) assert.equal(replicaOf(await first(n)), home, `session-less conversation ${n}`);
    assert.equal(replicaOf(await first(4, { 'x-session-id': 'shared-prompt-first-turn' })), home, "a session id's first turn");
    assert.equal(replicaOf(await first(5, { 'x-session-id': 'shared-prompt-second' })), home, 'and the next one');
    // The first turn's blocks were recorded (its body was read); with a live pin the body is not read: nothing new recorded.
    const blocks = async (): Promise<number> => sum(await metrics(), 'affinity_router_prefix_index_blocks');
    const held = await blocks();
    const again = await simRequest(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 'shared-prompt-second' },
      body: Buffer.from(JSON.stringify({ model: 'sim-model', max_tokens: 2, messages: [{ role: 'user', content: 'an unseen prompt. '.repeat(50) }] })),
    });
    assert.equal(again.headers['x-router-affinity'], 'retain');
    assert.equal(await blocks(), held, 'a pinned request is not parsed for its prompt');
  });

  it('a prefix-held replica loaded past the slack loses the next turn (switch;reason=overload)', async () => {
    const conv = new Conversation(200);
    await conv.turn(router.url);
    const home = replicaOf(await conv.turn(router.url));
    const put = await adminCall(router, 'PUT', '/sessions/loader', { body: { replica: home } });
    assert.equal(put.status, 200);
    const open: SimStream[] = [];
    const stream = async (): Promise<void> => {
      const s = await simStream(`${router.url}/v1/chat/completions`, {
        headers: { 'x-session-id': 'loader' },
        body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 20_000, messages: [{ role: 'user', content: 'long' }] }),
      });
      open.push(s);
      assert.equal(replicaOf(s), home);
    };
    try {
      await stream();
      await stream();
      await waitFor(() => router.outstanding(home) === 2, 10_000, 'two streams in flight');
      const kept = await conv.turn(router.url);
      assert.equal(kept.headers['x-router-affinity'], 'prefix', 'at +2 with slack 2 the prefix holds');
      assert.equal(replicaOf(kept), home);
      await stream();
      await waitFor(() => router.outstanding(home) === 3, 10_000, 'three streams in flight');
      const moved = await conv.turn(router.url);
      assert.equal(moved.headers['x-router-affinity'], 'switch;reason=overload');
      assert.notEqual(replicaOf(moved), home);
      assert.equal(router.outstanding(replicaOf(moved)), 0, 'to a least-loaded replica');
    } finally {
      for (const s of open) s.destroy();
    }
    await waitFor(() => sims.every((s) => router.outstanding(s.name) === 0), 5_000, 'in-flight back to 0');
  });
  it('forgets the prefixes of a drained replica: the next turn is a new conversation elsewhere, not a switch', async () => {
    const conv = new Conversation(300);
    await conv.turn(router.url);
    const home = replicaOf(await conv.turn(router.url));
    const cordon = await adminCall(router, 'PATCH', `/replicas/${home}`, { body: { draining: true } });
    assert.equal(cordon.status, 200, JSON.stringify(cordon.body));
    try {
      const next = await conv.turn(router.url);
      assert.notEqual(replicaOf(next), home);
      assert.equal(next.headers['x-router-affinity'], 'initialize');
      // Recorded for the new replica: the turn after stays there.
      const after = await conv.turn(router.url);
      assert.equal(after.headers['x-router-affinity'], 'prefix');
      assert.equal(replicaOf(after), replicaOf(next));
    } finally {
      await adminCall(router, 'PATCH', `/replicas/${home}`, { body: { draining: false } });
    }
  });
  it('a queued session-less request keeps its prefix: it leaves the queue for the holder with room (prefix)', async () => {
    const two = await startTestRouter(
      { replicas: sims.slice(0, 2).map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port, max_inflight: 1 })) },
      ['--affinity-slack', '2'],
      { ROUTER_ADMIN_TOKEN: TEST_TOKEN },
    );
    const open: SimStream[] = [];
    try {
      const conv = new Conversation(400);
      const home = replicaOf(await conv.turn(two.url));
      const other = sims.slice(0, 2).find((s) => s.name !== home)!.name;
      const hold = async (replica: string): Promise<SimStream> => {
        const put = await adminCall(two, 'PUT', `/sessions/hold-${replica}`, { body: { replica } });
        assert.equal(put.status, 200);
        const s = await simStream(`${two.url}/v1/chat/completions`, {
          headers: { 'x-session-id': `hold-${replica}` },
          body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 20_000, messages: [{ role: 'user', content: 'hold' }] }),
        });
        open.push(s);
        assert.equal(replicaOf(s), replica);
        return s;
      };
      const atHome = await hold(home);
      await hold(other);
      const queued = conv.turn(two.url);
      await waitFor(
        async () => sum(parseProm((await simRequest(`${two.url}/metrics`)).body.toString()).samples, 'affinity_router_queue_depth') === 1,
        5_000,
        'the turn to queue',
      );
      atHome.destroy();
      const r = await queued;
      assert.equal(r.headers['x-router-affinity'], 'prefix');
      assert.equal(replicaOf(r), home);
    } finally {
      for (const s of open) s.destroy();
      await two.close();
    }
  });
});
