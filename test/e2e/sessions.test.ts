import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { spawnSim, simRequest, simStream, stopAllSims, type SimProcess, type SimStream } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';

const chat = (extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 4, ...extra });

describe('sessions and routing (contract §4)', () => {
  let sims: SimProcess[];
  let router: TestRouter;

  before(async () => {
    sims = await Promise.all(['r0', 'r1', 'r2'].map((name) => spawnSim({ name, args: ['--itl-ms', '20'] })));
    router = await startTestRouter({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })) }, ['--affinity-slack', '2'], {
      ROUTER_ADMIN_TOKEN: TEST_TOKEN,
    });
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });

  // The body goes as bytes: Node sends headers and a string first chunk in the body's encoding,
  // which would turn latin1 header bytes into UTF-8 on the wire.
  const post = (headers: Record<string, string>, body: string) =>
    simRequest(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: Buffer.from(body),
    });

  it('keeps a session on one replica over header and body turns, as the replica itself reports', async () => {
    const seen = new Set<string>();
    for (let turn = 0; turn < 4; turn++) {
      const r = turn % 2 === 0 ? await post({ 'x-session-id': 'conv-1' }, chat()) : await post({}, chat({ session_id: 'conv-1' }));
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-session-id'], 'conv-1');
      seen.add(String(r.headers['x-replica-name']));
      assert.equal(r.headers['x-router-replica'], r.headers['x-replica-name']);
    }
    assert.equal(seen.size, 1);
    const sim = sims.find((s) => seen.has(s.name))!;
    assert.equal((await sim.stats()).by_session['conv-1'], 4);
  });

  it('mints a 32-hex id for a request without one, and that id keeps the next turn on the same replica', async () => {
    const first = await post({}, chat());
    const id = String(first.headers['x-session-id']);
    assert.match(id, /^[0-9a-f]{32}$/);
    const second = await post({ 'x-session-id': id }, chat());
    assert.equal(second.headers['x-replica-name'], first.headers['x-replica-name']);
    assert.equal(second.headers['x-router-affinity'], 'retain');
  });

  it('spreads 30 new sessions over 3 idle replicas 10/10/10', async () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 30; i++) {
      const r = await post({ 'x-session-id': `spread-${i}` }, chat());
      assert.equal(r.headers['x-router-affinity'], 'initialize');
      const n = String(r.headers['x-replica-name']);
      counts.set(n, (counts.get(n) ?? 0) + 1);
    }
    assert.deepEqual([...counts.values()].sort(), [10, 10, 10]);
  });

  it('with slack 2 keeps the pin at +2 in flight and moves it at +3 (switch;reason=overload)', async () => {
    const open: SimStream[] = [];
    const stream = async (): Promise<SimStream> => {
      const s = await simStream(`${router.url}/v1/chat/completions`, {
        headers: { 'x-session-id': 'busy' },
        body: chat({ stream: true, max_tokens: 200 }),
      });
      open.push(s);
      return s;
    };
    try {
      const s1 = await stream();
      const pinned = String(s1.headers['x-replica-name']);
      await stream();
      await waitFor(
        () => router.outstanding(pinned) === 2,
        10_000,
        `two streams in flight (have ${sims.map((s) => router.outstanding(s.name)).join('/')}, second on ${String(open[1]?.headers['x-replica-name'])})`,
      );
      const keep = await post({ 'x-session-id': 'busy' }, chat());
      assert.equal(keep.headers['x-router-affinity'], 'retain');
      assert.equal(keep.headers['x-replica-name'], pinned);
      const s3 = await stream();
      assert.equal(s3.headers['x-replica-name'], pinned);
      await waitFor(() => router.outstanding(pinned) === 3, 10_000, 'three streams in flight');
      const moved = await post({ 'x-session-id': 'busy' }, chat());
      assert.equal(moved.headers['x-router-affinity'], 'switch;reason=overload');
      assert.notEqual(moved.headers['x-replica-name'], pinned);
    } finally {
      for (const s of open) s.destroy();
    }
    await waitFor(() => sims.every((s) => router.outstanding(s.name) === 0), 10_000, 'in-flight back to 0');
  });

  it('replaces bad ids with a stable header-safe id: 300 chars, spaces, non-ASCII', async () => {
    const long = 'a'.repeat(300);
    const latin = 'caf\u00e9 id';
    const utf8AsLatin1 = Buffer.from('セッション', 'utf8').toString('latin1');
    for (const bad of [long, 'has spaces', latin, utf8AsLatin1]) {
      const a = await post({ 'x-session-id': bad }, chat());
      const b = await post({ 'x-session-id': bad }, chat());
      assert.equal(a.status, 200);
      const expected = 'h-' + createHash('sha256').update(Buffer.from(bad, 'latin1')).digest('hex').slice(0, 32);
      assert.equal(a.headers['x-session-id'], expected);
      assert.equal(b.headers['x-session-id'], expected);
      assert.equal(a.headers['x-replica-name'], b.headers['x-replica-name']);
      assert.equal(b.headers['x-router-affinity'], 'retain');
    }
    const body = await post({}, chat({ session_id: 'ünïcödé session' }));
    assert.equal(body.headers['x-session-id'], 'h-' + createHash('sha256').update('ünïcödé session', 'utf8').digest('hex').slice(0, 32));
  });

  it('does not let an invalid header hide a valid body session_id', async () => {
    const r = await post({ 'x-session-id': 'not valid!' }, chat({ session_id: 'body-wins' }));
    assert.equal(r.headers['x-session-id'], 'body-wins');
  });

  it('moves a pinned session with PUT /sessions/:id: the next turn goes to the new replica with retain', async () => {
    const first = await post({ 'x-session-id': 'movable' }, chat());
    const from = String(first.headers['x-replica-name']);
    const to = sims.map((s) => s.name).find((n) => n !== from)!;
    const before = (await sims.find((s) => s.name === to)!.stats()).by_session['movable'] ?? 0;
    const put = await adminCall(router, 'PUT', '/sessions/movable', { body: { replica: to } });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.equal(put.body.replica, to);
    const seen = await adminCall(router, 'GET', '/sessions/movable');
    assert.equal(seen.body.replica, to);
    const next = await post({ 'x-session-id': 'movable' }, chat());
    assert.equal(next.status, 200);
    assert.equal(next.headers['x-replica-name'], to, 'the replica itself answered');
    assert.equal(next.headers['x-router-replica'], to);
    assert.equal(next.headers['x-router-affinity'], 'retain');
    assert.equal((await sims.find((s) => s.name === to)!.stats()).by_session['movable'], before + 1);
    // The directory's per-replica counts follow the move.
    const counts = await adminCall(router, 'GET', `/sessions?replica=${to}`);
    assert.equal(counts.status, 200);
    assert.ok(counts.body.replicas[to] >= 1, JSON.stringify(counts.body));
    assert.equal(counts.body.replicas[from], undefined, 'filtered to the one replica asked for');
  });

  it('sends the effective session id upstream in X-Session-Id', async () => {
    const r = await post({}, chat({ session_id: 'upstream-sees-it' }));
    const sim = sims.find((s) => s.name === r.headers['x-replica-name'])!;
    const st = await sim.stats();
    assert.equal(st.last_request?.headers['x-session-id'], 'upstream-sees-it');
  });
});
