import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { simRequest, simStream, spawnSim, stopAllSims, type SimStream } from '../support/sim-process.js';
import { writeTempConfig, waitFor } from '../support/router.js';
import { spawnRouter, pidAlive } from '../support/router-process.js';
import { parseProm, sum } from '../support/prom.js';

const chat = (session: string, stream: boolean, tokens: number, content = 'hi'): string =>
  JSON.stringify({ model: 'sim-model', session_id: session, messages: [{ role: 'user', content }], max_tokens: tokens, stream });

/** The router's worker processes: its children running the worker entry. */
function workerPids(routerPid: number): number[] {
  const out = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(routerPid)], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((l) => l.includes('worker.js'))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

/** Runs `n` jobs, at most `width` at a time. */
async function pooled(n: number, width: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await job(next++);
    }),
  );
}

describe('--workers 2: worker processes relay /v1/ traffic, the primary owns routing state', () => {
  after(stopAllSims);

  it('keeps every conversation on its replica across workers, counts each request once, and answers probes from the primary', async () => {
    const [a, b] = await Promise.all([spawnSim({ name: 'a' }), spawnSim({ name: 'b' })]);
    const file = writeTempConfig({
      replicas: [
        { name: 'a', host: '127.0.0.1', port: a.port },
        { name: 'b', host: '127.0.0.1', port: b.port },
      ],
    });
    const router = await spawnRouter(['--config', file, '--workers', '2', '--health-interval', '0.2']);
    try {
      assert.equal(workerPids(router.pid).length, 2, 'two worker processes');
      await waitFor(async () => JSON.parse((await simRequest(`${router.url}/health`)).body.toString()).replicas_ready === 2, 10_000, 'both replicas ready');
      // Two kept-alive connections, opened one after the other: the primary hands new connections
      // to the workers in turn, so they land on different workers (the request log says which).
      // Every conversation sends its first turn on one and its second on the other.
      const [left, right] = [new http.Agent({ keepAlive: true, maxSockets: 1 }), new http.Agent({ keepAlive: true, maxSockets: 1 })];
      const post = (agent: http.Agent, body: string) =>
        simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', agent, headers: { 'content-type': 'application/json' }, body });
      assert.equal((await post(left, chat('open-left', false, 1))).status, 200);
      assert.equal((await post(right, chat('open-right', false, 1))).status, 200);
      const conversations = 1_000;
      const first = new Map<string, string>();
      const later: Array<{ session: string; replica: string; affinity: string }> = [];
      await pooled(conversations, 8, async (i) => {
        const session = `conv-${i}`;
        const t1 = await post(left, chat(session, false, 1));
        assert.equal(t1.status, 200);
        first.set(session, String(t1.headers['x-router-replica']));
        const t2 = await post(right, chat(session, false, 1, 'again'));
        assert.equal(t2.status, 200);
        later.push({ session, replica: String(t2.headers['x-router-replica']), affinity: String(t2.headers['x-router-affinity']) });
      });
      for (const t of later) {
        assert.equal(t.replica, first.get(t.session), `${t.session}: the later turn is on the replica of the first`);
        assert.equal(t.affinity, 'retain', `${t.session}: retained`);
      }
      assert.ok(new Set(first.values()).size === 2, 'conversations on both replicas');
      const lines = await waitFor(
        () => {
          const l = router.logs().filter((x) => x['event'] === 'request');
          return l.length >= 2 * conversations + 2 ? l : undefined;
        },
        10_000,
        'a request log line per request',
      );
      const split = new Map<string, Set<unknown>>();
      for (const l of lines) {
        const s = String(l['session']);
        if (!split.has(s)) split.set(s, new Set());
        split.get(s)!.add(l['worker']);
      }
      const across = [...split.entries()].filter(([s, w]) => s.startsWith('conv-') && w.size === 2 && !w.has(undefined)).length;
      assert.equal(across, conversations, 'every conversation had its two turns served by the two different workers');

      // Session-less conversations (prefix affinity): each turn re-sends the whole message list,
      // and the turns alternate between the two workers' connections.
      const chains = 50;
      for (let c = 0; c < chains; c++) {
        const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: 'You are a helpful assistant. Answer briefly.' }];
        const replicas = new Set<string>();
        for (let turn = 0; turn < 3; turn++) {
          messages.push({ role: 'user', content: `Conversation ${c}, question ${turn}: what about topic ${c * 7 + turn}?` });
          const body = JSON.stringify({ model: 'sim-model', messages, max_tokens: 2 });
          const r = await post(turn % 2 === 0 ? left : right, body);
          assert.equal(r.status, 200);
          replicas.add(String(r.headers['x-router-replica']));
          messages.push({ role: 'assistant', content: `answer ${turn}` });
        }
        assert.equal(replicas.size, 1, `session-less conversation ${c} stayed on one replica across workers`);
      }

      left.destroy();
      right.destroy();
      // A stream relayed by a worker: its chunk gaps and its request reach the primary's /metrics once.
      const s = await simStream(`${router.url}/v1/chat/completions`, { body: chat('streamed', true, 5) });
      assert.equal(await s.done, 'end');
      const total = 2 * conversations + 3 * chains + 3;
      // The stream's end reaches the primary one message after its client saw it: scraped until counted.
      const text = await waitFor(
        async () => {
          const t = (await simRequest(`${router.url}/metrics`)).body.toString();
          return sum(parseProm(t).samples, 'affinity_router_requests_total', { route: '/v1/chat/completions' }) >= total ? t : undefined;
        },
        10_000,
        `${total} requests counted`,
      );
      const { samples, problems } = parseProm(text);
      assert.deepEqual(problems, []);
      assert.equal(sum(samples, 'affinity_router_requests_total', { route: '/v1/chat/completions' }), total, 'each request counted once');
      assert.equal(sum(samples, 'affinity_router_requests_received_total'), sum(samples, 'affinity_router_requests_total'));
      assert.ok(sum(samples, 'affinity_router_stream_chunk_gap_seconds_count') >= 4, "the stream's gaps, observed in a worker, are in the primary's answer");
      assert.equal((text.match(/^affinity_router_requests_received_total /gm) ?? []).length, 1, 'one series, no per-worker copy');
      assert.equal((await a.stats()).requests + (await b.stats()).requests, total, 'the replicas saw each request once');

      // First turns of sessions with an id are placed where their prompt is cached, read from the
      // decoded body: here gzip-encoded, over both workers' connections. The last two are over
      // 64 KiB, so the worker does not read them: the primary asks for the body.
      const system = { role: 'system', content: 'You are the support agent of the Lighthouse Shipping Company. Policy follows. '.repeat(40) };
      const ask = (n: number) => {
        const question = n >= 5 ? `customer ${n} asks a long question. `.repeat(2_500) : `customer ${n} asks`;
        return JSON.stringify({ model: 'sim-model', max_tokens: 2, messages: [system, { role: 'user', content: question }] });
      };
      assert.ok(Buffer.byteLength(ask(5)) > 64 * 1024 && Buffer.byteLength(ask(4)) < 64 * 1024);
      const [one, two] = [new http.Agent({ keepAlive: true, maxSockets: 1 }), new http.Agent({ keepAlive: true, maxSockets: 1 })];
      const seeded = await post(one, ask(0));
      assert.equal(seeded.headers['x-router-affinity'], 'initialize');
      const home = String(seeded.headers['x-router-replica']);
      for (let n = 1; n <= 6; n++) {
        const r = await simRequest(`${router.url}/v1/chat/completions`, {
          method: 'POST',
          agent: n % 2 === 0 ? one : two,
          headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-session-id': `gzip-first-${n}` },
          body: gzipSync(ask(n)),
        });
        assert.equal(r.headers['x-router-affinity'], 'initialize', `first turn ${n}: a new conversation`);
        assert.equal(String(r.headers['x-router-replica']), home, `first turn ${n}: placed where its prompt is cached`);
      }
      one.destroy();
      two.destroy();
    } finally {
      router.child.kill('SIGTERM');
      await router.exited();
    }
  });

  it('counts max_inflight over every worker, replaces a worker that dies without touching the others, and drains on SIGTERM', async () => {
    // 40 tokens 50 ms apart: each stream holds its place for about two seconds.
    const sim = await spawnSim({ name: 'capped', args: ['--itl-ms', '50'] });
    const file = writeTempConfig({ replicas: [{ name: 'capped', host: '127.0.0.1', port: sim.port, max_inflight: 4 }] });
    const router = await spawnRouter(['--config', file, '--workers', '2', '--health-interval', '0.2']);
    let exited = false;
    try {
      await waitFor(async () => JSON.parse((await simRequest(`${router.url}/health`)).body.toString()).replicas_ready === 1, 10_000, 'replica ready');
      const before = workerPids(router.pid);
      assert.equal(before.length, 2);
      // Eight concurrent streams over new connections, so over both workers: four run, four queue.
      const open = (i: number): Promise<SimStream> => simStream(`${router.url}/v1/chat/completions`, { body: chat(`s${i}`, true, 40) });
      const first = Array.from({ length: 8 }, (_, i) => open(i));
      await waitFor(async () => (await sim.stats()).running === 4, 10_000, 'four running on the replica');
      await waitFor(async () => JSON.parse((await simRequest(`${router.url}/health`)).body.toString()).queued === 4, 10_000, 'four queued in the router');
      assert.equal((await sim.stats()).running, 4, 'never more than max_inflight on the replica');
      const streams = await Promise.all(first);
      const ends = await Promise.all(streams.map((s) => s.done));
      assert.deepEqual(ends, Array(8).fill('end'), 'all eight complete, the queued ones after the first four');

      // A worker killed while both carry streams: its clients' connections close, the other worker's
      // streams finish, and a new worker takes its place.
      const running = await Promise.all(Array.from({ length: 4 }, (_, i) => open(100 + i)));
      await waitFor(async () => (await sim.stats()).running === 4, 10_000, 'four running');
      await Promise.all(running.map((s) => s.waitForEvents(2)));
      process.kill(before[0], 'SIGKILL');
      const after = await Promise.all(running.map((s) => s.done));
      assert.equal(after.filter((e) => e === 'end').length, 2, `the surviving worker's two streams complete (${after.join(',')})`);
      assert.equal(after.filter((e) => e === 'error').length, 2, "the dead worker's two streams are cut, not left hanging");
      for (const s of running.filter((_, i) => after[i] === 'end')) assert.match(s.events.at(-1)!.data, /\[DONE\]/);
      await router.waitForLog((l) => l['event'] === 'worker_exited');
      await waitFor(() => workerPids(router.pid).length === 2 && !workerPids(router.pid).includes(before[0]), 10_000, 'a new worker');
      await waitFor(async () => (await sim.stats()).running === 0, 10_000, 'nothing left running');
      const health = JSON.parse((await simRequest(`${router.url}/health`)).body.toString()) as { replicas: Array<{ outstanding: number }> };
      assert.equal(health.replicas[0].outstanding, 0, "the dead worker's requests no longer count as in flight");
      const again = await Promise.all(
        [0, 1, 2, 3].map((i) => simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', body: chat(`after-${i}`, false, 1) })),
      );
      assert.deepEqual(
        again.map((r) => r.status),
        [200, 200, 200, 200],
        'served again on both workers',
      );

      // SIGTERM: a stream in flight finishes, then every worker and the primary exit 0.
      const last = await open(200);
      await last.waitForEvents(1);
      const workers = workerPids(router.pid);
      router.child.kill('SIGTERM');
      assert.equal(await last.done, 'end', 'the stream in flight finished during the drain');
      const exit = await router.exited();
      exited = true;
      assert.deepEqual(exit, { code: 0, signal: null });
      for (const pid of workers) assert.equal(pidAlive(pid), false, `worker ${pid} is gone`);
    } finally {
      if (!exited) {
        router.child.kill('SIGKILL');
        await router.exited();
      }
    }
  });
});
