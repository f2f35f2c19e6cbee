/**
 * Issue 7, scenario 10 (admin token): a wrong token is refused in a time that does not depend on
 * how much of it matches, and the token never shows up anywhere the router writes or answers:
 * logs, error bodies, /metrics, /replicas, /fleet, the state file, or a launched replica's
 * environment, argv and log.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { spawnSim, simRequest, stopAllSims } from '../support/sim-process.js';
import { startTestRouter, waitFor, writeTempConfig, type TestRouter } from '../support/router.js';
import { freePortRange, pidAlive, spawnRouter, type RouterProcess } from '../support/router-process.js';
import { simHost } from '../support/fleet.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

/** One GET with `token`, on a keep-alive agent; resolves with the status and the time taken (ms). */
function timedGet(agent: Agent, url: string, token: string): Promise<{ status: number; ms: number }> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = request(`${url}/replicas`, { agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
    });
    req.on('error', reject);
    req.end();
  });
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

describe('admin token secrecy (issue 7 §10)', () => {
  const routers: TestRouter[] = [];
  const procs: RouterProcess[] = [];
  const pids: number[] = [];
  after(async () => {
    for (const r of routers) await r.close().catch(() => undefined);
    for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
    for (const pid of pids) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    await stopAllSims();
  });

  it('answers a wrong token in the same time whether it shares no prefix or all but its last character', async (t) => {
    const token = randomBytes(24).toString('hex');
    const sim = await spawnSim({ name: 't0' });
    const router = await startTestRouter({ replicas: [{ name: 't0', host: '127.0.0.1', port: sim.port }] }, [], { ROUTER_ADMIN_TOKEN: token });
    routers.push(router);
    const flip = (c: string): string => (c === 'a' ? 'b' : 'a');
    const none = [...token].map(flip).join('');
    const most = token.slice(0, -1) + flip(token.at(-1)!);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < 50; i++) await timedGet(agent, router.url, i % 2 === 0 ? none : most); // warm-up
      const a: number[] = [];
      const b: number[] = [];
      for (let i = 0; i < 300; i++) {
        // interleaved, so drift and GC hit both alike
        const [first, second] = i % 2 === 0 ? [none, most] : [most, none];
        const x = await timedGet(agent, router.url, first);
        const y = await timedGet(agent, router.url, second);
        assert.deepEqual([x.status, y.status], [401, 401]);
        (first === none ? a : b).push(x.ms);
        (second === none ? a : b).push(y.ms);
      }
      const [ma, mb] = [median(a), median(b)];
      const diff = Math.abs(ma - mb);
      t.diagnostic(`median ms: no shared prefix ${ma.toFixed(3)}, all but one shared ${mb.toFixed(3)}`);
      assert.ok(diff < Math.max(0.2 * Math.min(ma, mb), 0.5), `medians differ by ${diff.toFixed(3)} ms (${ma.toFixed(3)} vs ${mb.toFixed(3)})`);
      assert.equal((await timedGet(agent, router.url, token)).status, 200);
    } finally {
      agent.destroy();
    }
  });

  it("never writes or answers the token: logs, error bodies, /metrics, /replicas, /fleet, state file, a launched replica's env, argv and log", async () => {
    const token = `tok-${randomBytes(16).toString('hex')}-secret`;
    const sim = await spawnSim({ name: 'st' });
    const base = await freePortRange(2);
    const host = simHost('h', [0, 1], base);
    const state = join(tempDir('ar-secret-'), 'state.json');
    const cfg = writeTempConfig({ replicas: [{ name: 'st', host: '127.0.0.1', port: sim.port }], hosts: [host] });
    const router = await spawnRouter(['--config', cfg, '--initial-replicas', '1', '--health-interval', '0.2', '--state-file', state], {
      ROUTER_ADMIN_TOKEN: token,
    });
    procs.push(router);
    const seen: string[] = [];
    const call = async (method: string, path: string, opts: { auth?: string | null; body?: string; type?: string } = {}): Promise<number> => {
      const headers: Record<string, string> = {};
      const auth = opts.auth === undefined ? `Bearer ${token}` : opts.auth;
      if (auth !== null) headers['authorization'] = auth;
      if (opts.body !== undefined) headers['content-type'] = opts.type ?? 'application/json';
      // Generous: a DELETE waits for the drain and the stop, slow on a loaded 2-core machine.
      const r = await simRequest(`${router.url}${path}`, {
        method,
        headers,
        body: opts.body === undefined ? undefined : Buffer.from(opts.body),
        timeoutMs: 60_000,
      });
      seen.push(`${method} ${path} ${r.status} ${JSON.stringify(r.headers)} ${r.body.toString()}`);
      return r.status;
    };
    const ready = await waitFor(
      async () => {
        await call('GET', '/replicas');
        const l = JSON.parse(seen.at(-1)!.slice(seen.at(-1)!.indexOf('{"replicas"'))) as {
          replicas: Array<{ name: string; ready: boolean; pid: number; log_path: string }>;
        };
        return l.replicas.find((r) => r.name === 'h-d0' && r.ready);
      },
      15_000,
      'the launched replica',
    );
    pids.push(ready.pid);
    // wrong tokens that contain the real one, or part of it
    for (const auth of [
      `Bearer ${token}x`,
      `Bearer ${token.slice(0, -1)}`,
      `Bearer x${token}`,
      token,
      `Basic ${Buffer.from(`u:${token}`).toString('base64')}`,
      `Bearer ${token} ${token}`,
    ]) {
      assert.equal(await call('GET', '/fleet', { auth }), 401, auth);
    }
    assert.equal(await call('PATCH', '/replicas/st', { body: JSON.stringify({ draining: true, token }) }), 400);
    assert.equal(await call('PATCH', '/replicas/st', { body: JSON.stringify({ draining: token }) }), 400);
    // (values an admin deliberately sends, such as a host name, are echoed in audit lines and errors: not a leak)
    assert.equal(await call('POST', '/replicas', { body: JSON.stringify({ host: 'nope' }) }), 404);
    assert.equal(await call('PUT', '/sessions/sess-1', { body: JSON.stringify({ replica: 'nope' }) }), 404);
    assert.equal(await call('PUT', '/sessions/sess-1', { body: JSON.stringify({ replica: 'st' }) }), 200);
    assert.equal(await call('DELETE', '/sessions/sess-1'), 204);
    assert.equal(await call('PATCH', '/replicas/st', { body: '{"draining":' }), 400);
    assert.equal(await call('PATCH', '/replicas/st', { body: JSON.stringify({ draining: true }) }), 200);
    assert.equal(await call('PATCH', '/replicas/st', { body: JSON.stringify({ draining: false }) }), 200);
    assert.equal(await call('POST', '/replicas', { body: JSON.stringify({ count: 1 }) }), 202);
    assert.equal(await call('DELETE', '/replicas/st'), 409);
    // the data plane forwards a client's own Authorization to the replica; the router itself must not record it
    assert.equal(await call('POST', '/v1/chat/completions', { body: '{"messages":[],"max_tokens":1}' }), 200);
    for (const p of ['/replicas', '/fleet', '/sessions', '/metrics', '/health', '/readyz', '/livez', '/docs-json']) await call('GET', p);
    await waitFor(() => readFileSync(state, 'utf8').includes('h-d1'), 10_000, 'the state file to record the second launch');
    assert.equal(await call('DELETE', '/replicas/h-d1'), 200);

    const places: Array<[string, string]> = [
      ['router stdout', JSON.stringify(router.logs())],
      ['router stderr', router.stderr()],
      ['responses', seen.join('\n')],
      ['state file', readFileSync(state, 'utf8')],
      ['router argv', readFileSync(`/proc/${router.pid}/cmdline`, 'latin1')],
      ['replica environment', readFileSync(`/proc/${ready.pid}/environ`, 'latin1')],
      ['replica argv', readFileSync(`/proc/${ready.pid}/cmdline`, 'latin1')],
      ...readdirSync(host.log_dir).map((f): [string, string] => [`replica log ${f}`, readFileSync(join(host.log_dir, f), 'latin1')]),
    ];
    for (const [where, text] of places) {
      assert.ok(text.length > 0 || where === 'router stderr' || where.startsWith('replica log'), `${where} was read`);
      assert.equal(text.includes(token), false, `the admin token appears in the ${where}`);
      assert.equal(text.includes(token.slice(4, 36)), false, `part of the admin token appears in the ${where}`);
    }
    assert.equal(/ROUTER_[A-Z_]+=/.test(readFileSync(`/proc/${ready.pid}/environ`, 'latin1')), false, 'no ROUTER_* variable reaches a replica');
    assert.ok(
      router.logs().some((l) => l['event'] === 'audit' && /^[0-9a-f]{12}$/.test(String(l['who']))),
      'audit lines carry a token id',
    );
    router.child.kill('SIGTERM');
    assert.equal((await router.exited()).code, 0);
  });
});
