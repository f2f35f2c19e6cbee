/**
 * Issue 7, scenario 5: the router is SIGKILLed while streams and short requests are in flight and
 * restarted with the same `--state-file`. The replicas it launched survive and are adopted (same
 * pids, never relaunched), keep serving, and no device slot is ever held twice.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { simRequest, simStream, stopAllSims, type SimStream } from '../support/sim-process.js';
import { adminCall, TEST_TOKEN, waitFor, writeTempConfig } from '../support/router.js';
import { freePortRange, pidAlive, spawnRouter, type RouterProcess } from '../support/router-process.js';
import { simHost } from '../support/fleet.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

const ENV = { ROUTER_ADMIN_TOKEN: TEST_TOKEN };
const chat = (extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });

interface ReplicaRow {
  name: string;
  kind: string;
  ready: boolean;
  pid: number;
  url: string;
  slot: string;
}
interface SlotRow {
  name: string;
  state: string;
  replica: string | null;
  port: number;
}

const replicas = async (r: { url: string }): Promise<ReplicaRow[]> => (await adminCall(r, 'GET', '/replicas')).body.replicas as ReplicaRow[];

describe('router crash under load (issue 7 §5)', () => {
  const procs: RouterProcess[] = [];
  const pids = new Set<number>();
  after(async () => {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
    for (const pid of pids) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    await stopAllSims();
  });

  it('after SIGKILL with requests in flight, a restart adopts the same pids, keeps serving, relaunches nothing and double-books no slot', async () => {
    const base = await freePortRange(3);
    const state = join(tempDir('ar-crash-'), 'state.json');
    const cfg = writeTempConfig({ hosts: [simHost('k', [0, 1, 2], base, ['--itl-ms', '20'])] });
    const args = ['--config', cfg, '--initial-replicas', '2', '--health-interval', '0.2', '--state-file', state];
    const first = await spawnRouter(args, ENV);
    procs.push(first);
    const before = await waitFor(
      async () => {
        const l = await replicas(first);
        return l.length === 2 && l.every((r) => r.ready) ? l : undefined;
      },
      15_000,
      'two ready replicas',
    );
    for (const r of before) pids.add(r.pid);
    const served = new Map<number, number>();
    for (const r of before) served.set(r.pid, JSON.parse((await simRequest(`${r.url}/__sim/stats`)).body.toString()).requests as number);

    // load: 20 long streams and 10 clients sending short requests back to back
    const streams: SimStream[] = [];
    for (let i = 0; i < 20; i++) {
      streams.push(
        await simStream(`${first.url}/v1/chat/completions`, { headers: { 'x-session-id': `st-${i}` }, body: chat({ stream: true, max_tokens: 200 }) }),
      );
    }
    let stop = false;
    const shortOutcomes: string[] = [];
    const shorts = Array.from({ length: 10 }, async (_, i) => {
      while (!stop) {
        try {
          const r = await simRequest(`${first.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'x-session-id': `sh-${i}` },
            body: Buffer.from(chat()),
            timeoutMs: 5_000,
          });
          shortOutcomes.push(String(r.status));
        } catch {
          shortOutcomes.push('error');
          return;
        }
      }
    });
    await Promise.all(streams.map((s) => s.waitForEvents(2)));
    const health = JSON.parse((await simRequest(`${first.url}/health`)).body.toString()) as { replicas: Array<{ outstanding: number }> };
    assert.ok(health.replicas.reduce((n, r) => n + r.outstanding, 0) >= 20, 'requests are in flight when the router dies');
    first.child.kill('SIGKILL');
    await first.exited();
    stop = true;
    await Promise.all(shorts);
    for (const s of streams) {
      const how = await s.done;
      const done = s.events.some((e) => e.data === '[DONE]');
      assert.ok(how === 'error' || done, 'a stream cut by the crash never looks complete');
    }
    assert.ok(
      shortOutcomes.every((o) => o === '200' || o === 'error'),
      `short requests: ${[...new Set(shortOutcomes)].join(',')}`,
    );
    for (const r of before) assert.ok(pidAlive(r.pid), `replica ${r.name} survives the router crash`);

    const second = await spawnRouter(args, ENV);
    procs.push(second);
    const adopted = await replicas(second);
    assert.deepEqual(
      adopted.map((r) => [r.name, r.kind, r.pid, r.ready]).sort(),
      before.map((r) => [r.name, 'adopted', r.pid, true]).sort(),
      'the same processes are adopted, ready at once',
    );
    assert.equal(second.logs().filter((l) => l['event'] === 'launch').length, 0, 'nothing relaunched');
    for (const r of before) {
      const st = JSON.parse((await simRequest(`${r.url}/__sim/stats`)).body.toString()) as { pid: number; requests: number };
      assert.equal(st.pid, r.pid);
      assert.ok(st.requests > served.get(r.pid)!, 'the replica process kept its history (it was not restarted)');
    }
    const names = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const r = await simRequest(`${second.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': `after-${i}` }, body: Buffer.from(chat()) });
      assert.equal(r.status, 200);
      names.add(String(r.headers['x-replica-name']));
    }
    assert.deepEqual([...names].sort(), before.map((r) => r.name).sort(), 'both adopted replicas serve');

    const fleet = (await adminCall(second, 'GET', '/fleet')).body as { slots: SlotRow[]; orphans: unknown[]; capacity: { free_slots: string[] } };
    assert.deepEqual(fleet.orphans, []);
    assert.deepEqual(
      fleet.slots
        .filter((s) => s.state === 'reserved')
        .map((s) => s.replica)
        .sort(),
      before.map((r) => r.name).sort(),
    );
    assert.deepEqual(fleet.capacity.free_slots, ['k-d2']);
    const two = await adminCall(second, 'POST', '/replicas', { body: { count: 2 } });
    assert.equal(two.status, 409, 'only one slot is free: a launch of two is refused whole');
    const one = await adminCall(second, 'POST', '/replicas');
    assert.equal(one.status, 202);
    assert.equal(one.body.name, 'k-d2', 'the launch takes the free slot, never an adopted one');
    const all = await waitFor(
      async () => {
        const l = await replicas(second);
        return l.length === 3 && l.every((r) => r.ready) ? l : undefined;
      },
      15_000,
      'three ready replicas',
    );
    for (const r of all) pids.add(r.pid);
    assert.equal(new Set(all.map((r) => r.pid)).size, 3, 'three distinct processes');
    assert.equal(new Set(all.map((r) => r.url)).size, 3, 'three distinct ports');
    const slots = (await adminCall(second, 'GET', '/fleet')).body.slots as SlotRow[];
    assert.deepEqual(
      slots.map((s) => [s.name, s.state, s.replica]),
      [
        ['k-d0', 'reserved', 'k-d0'],
        ['k-d1', 'reserved', 'k-d1'],
        ['k-d2', 'reserved', 'k-d2'],
      ],
    );

    second.child.kill('SIGTERM');
    assert.equal((await second.exited()).code, 0);
    // adopted replicas are not the new router's children: their exit is seen a moment after it stopped answering
    for (const r of all) await waitFor(() => !pidAlive(r.pid), 5_000, `${r.name} (pid ${r.pid}) to be stopped by the clean shutdown`);
  });
});
