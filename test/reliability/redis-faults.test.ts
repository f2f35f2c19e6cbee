import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { simRequest, stopAllSims } from '../support/sim-process.js';
import { adminCall, TEST_TOKEN, waitFor, writeTempConfig } from '../support/router.js';
import { freePortRange, pidAlive, spawnRouter, type RouterProcess } from '../support/router-process.js';
import { simHost } from '../support/fleet.js';
import { startRedis, type TestRedis } from '../support/redis.js';
import { parseProm, sum } from '../support/prom.js';

/**
 * Redis faults under continuous traffic (issue 26): two routers share a real redis-server and a
 * launched fleet of two simulator processes. Redis stalls, dies and comes back empty, and a leader
 * is killed during a fault: every request is answered 200 by the replica its conversation holds,
 * no replica is relaunched, and exactly one router leads once Redis is back. The fault durations
 * are real time (they are the fault), every wait on the routers polls with a deadline.
 */

const ENV = { ROUTER_ADMIN_TOKEN: TEST_TOKEN };
const SESSIONS = 12;
const LOOPS = 4;
const chat = Buffer.from(JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }));

interface Sample {
  readonly phase: string;
  readonly via: string;
  readonly session: string;
  readonly status: number;
  readonly replica: string;
  readonly detail: string;
}

interface ReplicaRow {
  readonly name: string;
  readonly kind: string;
  readonly ready: boolean;
  readonly pid: number | null;
}

/** Conversations whose turns alternate over the live routers, LOOPS at a time, until stopped. */
class Traffic {
  readonly samples: Sample[] = [];
  phase = 'warm-up';
  targets: RouterProcess[];
  private running = true;
  private readonly loops: Promise<void>[];
  private readonly pending = new Map<string, number>();

  constructor(targets: RouterProcess[]) {
    this.targets = targets;
    this.loops = Array.from({ length: LOOPS }, (_, k) => this.loop(k));
  }

  private async loop(k: number): Promise<void> {
    for (let i = k; this.running; i += LOOPS) {
      const targets = this.targets;
      const via = targets[Math.floor(i / SESSIONS) % targets.length];
      const session = `conv-${i % SESSIONS}`;
      const phase = this.phase;
      this.pending.set(via.url, (this.pending.get(via.url) ?? 0) + 1);
      try {
        const r = await simRequest(`${via.url}/v1/chat/completions`, { method: 'POST', headers: { 'x-session-id': session }, body: chat, timeoutMs: 15_000 });
        const replica = String(r.headers['x-replica-name'] ?? '');
        this.samples.push({ phase, via: via.url, session, status: r.status, replica, detail: r.status === 200 ? '' : r.body.toString().slice(0, 200) });
      } catch (e) {
        this.samples.push({ phase, via: via.url, session, status: 0, replica: '', detail: (e as Error).message });
      } finally {
        this.pending.set(via.url, this.pending.get(via.url)! - 1);
      }
    }
  }

  /** Send only to `targets` from now on; resolves once no request to another router is in flight. */
  async only(targets: RouterProcess[]): Promise<void> {
    this.targets = targets;
    const urls = new Set(targets.map((t) => t.url));
    await waitFor(() => [...this.pending].every(([url, n]) => n === 0 || urls.has(url)), 20_000, 'requests to the other routers to end');
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /** Requests of `phase` that were not answered 200, described. */
  failures(phase: string): string[] {
    return this.samples.filter((s) => s.phase === phase && s.status !== 200).map((s) => `${s.status} via ${s.via} (${s.session}): ${s.detail}`);
  }

  count(phase: string): number {
    return this.samples.filter((s) => s.phase === phase).length;
  }

  /** Conversations that were answered by more than one replica over the whole run. */
  moved(): string[] {
    const seen = new Map<string, Set<string>>();
    for (const s of this.samples) {
      if (s.status !== 200) continue;
      const set = seen.get(s.session) ?? new Set<string>();
      set.add(s.replica);
      seen.set(s.session, set);
    }
    return [...seen].filter(([, set]) => set.size > 1).map(([id, set]) => `${id}: ${[...set].join(', ')}`);
  }
}

interface FleetRow {
  readonly slots: ReadonlyArray<{ readonly name: string; readonly state: string; readonly replica: string | null }>;
  readonly orphans: readonly unknown[];
  readonly failures: readonly unknown[];
}

const replicas = async (r: RouterProcess): Promise<ReplicaRow[]> => (await adminCall(r, 'GET', '/replicas')).body.replicas as ReplicaRow[];
const leading = async (r: RouterProcess): Promise<boolean> =>
  sum(parseProm((await simRequest(`${r.url}/metrics`)).body.toString()).samples, 'affinity_router_fleet_leader', {}) === 1;
const epochs = (r: RouterProcess): number[] =>
  r
    .logs()
    .filter((l) => l['event'] === 'leader')
    .map((l) => Number(l['epoch']));
const launches = (routers: RouterProcess[]): number => routers.reduce((n, r) => n + r.logs().filter((l) => l['event'] === 'launch').length, 0);

describe('Redis faults under traffic: no request fails, no replica is lost or relaunched (issue 26)', () => {
  let rd: TestRedis | null = null;
  let cfg = '';
  let common: string[] = [];
  const routers: RouterProcess[] = [];
  let pids: number[] = [];
  let traffic: Traffic | undefined;

  const start = async (): Promise<RouterProcess> => {
    const r = await spawnRouter(common, ENV);
    routers.push(r);
    return r;
  };
  const live = (): RouterProcess[] => routers.filter((r) => r.child.exitCode === null && r.child.signalCode === null);

  /** Once the fault is over: one leader, which owns both original processes (pids proven), and every live router routes to both. */
  const settled = async (what: string, oneLeader = true): Promise<void> => {
    let seen: unknown;
    await waitFor(
      async () => {
        const rs = live();
        seen = await Promise.all(rs.map(replicas));
        const leaders = oneLeader ? (await Promise.all(rs.map(leading))).filter(Boolean).length : 1;
        if (leaders !== 1) return false;
        for (const r of rs) {
          const rows = await replicas(r);
          if (rows.length !== 2 || !rows.every((x) => x.ready)) return false;
          if (!oneLeader) continue;
          if (!(await leading(r))) continue;
          if (rows.some((x) => x.kind === 'shared') || JSON.stringify(rows.map((x) => x.pid).sort()) !== JSON.stringify(pids)) return false;
          // Every slot held by its own replica; nothing reported as an orphan or a failed launch.
          const fleet = (await adminCall(r, 'GET', '/fleet')).body as FleetRow;
          if (!fleet.slots.every((x) => x.state === 'reserved' && x.replica === x.name) || fleet.orphans.length > 0 || fleet.failures.length > 0) return false;
        }
        return true;
      },
      30_000,
      () => `${what}: one leader holding pids ${pids.join(',')}; seen ${JSON.stringify(seen)}`,
    );
  };

  const checkPhase = (t: { diagnostic(m: string): void }, phase: string): void => {
    t.diagnostic(`${phase}: ${traffic!.count(phase)} requests, ${traffic!.failures(phase).length} not 200`);
    assert.ok(traffic!.count(phase) > 20, `traffic ran during ${phase} (${traffic!.count(phase)} requests)`);
    assert.deepEqual(traffic!.failures(phase), [], `every request during ${phase} answered 200`);
    assert.deepEqual(traffic!.moved(), [], 'every conversation stayed on its replica');
    assert.equal(launches(routers), 2, 'no replica was launched after the first two');
    for (const pid of pids) assert.ok(pidAlive(pid), `replica process ${pid} still runs`);
  };

  before(async () => {
    rd = await startRedis();
    if (rd === null) return;
    const base = await freePortRange(2);
    cfg = writeTempConfig({ hosts: [simHost('lh', [0, 1], base)] });
    common = ['--config', cfg, '--redis-url', rd.url, '--health-interval', '0.2', '--lease-ttl', '3', '--initial-replicas', '2'];
    const a = await start();
    const fleet = await waitFor(
      async () => {
        const rows = await replicas(a);
        return rows.length === 2 && rows.every((x) => x.ready && x.pid !== null) ? rows : undefined;
      },
      20_000,
      'the leader to launch two replicas',
    );
    pids = fleet.map((x) => x.pid!).sort();
    const b = await start();
    await waitFor(async () => (await replicas(b)).filter((x) => x.ready && x.kind === 'shared').length === 2, 15_000, 'the follower to mirror the fleet');
    traffic = new Traffic([a, b]);
    await waitFor(() => traffic!.count('warm-up') > 3 * SESSIONS, 15_000, 'every conversation to start');
    assert.deepEqual(traffic.failures('warm-up'), []);
  });

  after(async () => {
    await traffic?.stop();
    const dir = process.env['FAULTS_LOG_DIR'];
    if (dir !== undefined)
      routers.forEach((r, i) =>
        writeFileSync(
          `${dir}/router-${i}.log`,
          r
            .logs()
            .map((l) => JSON.stringify(l))
            .join('\n'),
        ),
      );
    for (const r of routers) if (r.child.exitCode === null) r.child.kill('SIGKILL');
    for (const pid of pids) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    await rd?.stop();
    await stopAllSims();
  });

  it('a Redis stall of 8 s (SIGSTOP) fails no request, moves no conversation and keeps one leader with the same processes', async (t) => {
    if (rd === null) return t.skip('redis-server is not installed');
    traffic!.phase = 'stall';
    rd.pause();
    await sleep(8_000);
    rd.resume();
    await settled('after the stall');
    traffic!.phase = 'after-stall';
    await waitFor(() => traffic!.count('after-stall') > 40, 15_000, 'traffic after the stall');
    checkPhase(t, 'stall');
    checkPhase(t, 'after-stall');
  });

  it('Redis killed for 5 s and back empty: no request fails, the epoch moves forward, nothing is relaunched and pids stay proven', async (t) => {
    if (rd === null) return t.skip('redis-server is not installed');
    const before = Math.max(...routers.flatMap(epochs));
    traffic!.phase = 'restart-empty';
    await rd.stop();
    await sleep(5_000);
    await rd.restart();
    await settled('after Redis came back empty');
    traffic!.phase = 'after-restart';
    await waitFor(() => traffic!.count('after-restart') > 40, 15_000, 'traffic after the restart');
    checkPhase(t, 'restart-empty');
    checkPhase(t, 'after-restart');
    const now = await waitFor(async () => {
      for (const r of live()) if (await leading(r)) return r;
      return undefined;
    });
    const epoch = Math.max(...epochs(now));
    assert.ok(epoch > before, `the leader's epoch ${epoch} is above every epoch before the restart (${before})`);
    assert.equal(routers.flatMap((r) => r.logs()).filter((l) => /EADDRINUSE/.test(JSON.stringify(l))).length, 0, 'nothing launched onto a busy port');
  });

  it('the leader killed during a stall: the survivor serves throughout and, once Redis answers, leads the same processes', async (t) => {
    if (rd === null) return t.skip('redis-server is not installed');
    const leader = await waitFor(async () => {
      for (const r of live()) if (await leading(r)) return r;
      return undefined;
    });
    const survivor = live().find((r) => r !== leader)!;
    traffic!.phase = 'leader-killed';
    await traffic!.only([survivor]);
    rd.pause();
    leader.child.kill('SIGKILL');
    await leader.exited();
    await sleep(4_000);
    rd.resume();
    await settled('after the leader died');
    assert.ok(await leading(survivor));
    const rows = await replicas(survivor);
    assert.deepEqual(
      rows.map((x) => x.kind),
      ['adopted', 'adopted'],
    );
    checkPhase(t, 'leader-killed');
  });

  it('the leader killed while Redis is down, Redis back empty: the follower serves throughout and leads the same processes', async (t) => {
    if (rd === null) return t.skip('redis-server is not installed');
    const leader = live()[0];
    const follower = await start();
    await waitFor(
      async () => (await replicas(follower)).filter((x) => x.ready && x.kind === 'shared').length === 2,
      15_000,
      'the new follower to mirror the fleet',
    );
    traffic!.targets = [leader, follower];
    traffic!.phase = 'pair-again';
    await waitFor(() => traffic!.count('pair-again') > 3 * SESSIONS, 15_000, 'the new follower to serve the conversations');
    traffic!.phase = 'leader-killed-redis-down';
    await traffic!.only([follower]);
    await rd.stop();
    leader.child.kill('SIGKILL');
    await leader.exited();
    await sleep(3_000);
    await rd.restart();
    await settled('after the leader died with Redis down');
    assert.deepEqual(
      (await replicas(follower)).map((x) => x.kind),
      ['adopted', 'adopted'],
    );
    checkPhase(t, 'pair-again');
    checkPhase(t, 'leader-killed-redis-down');
  });

  it('Redis gone for good and the leader killed: a follower keeps routing every conversation to its replica', async (t) => {
    if (rd === null) return t.skip('redis-server is not installed');
    const leader = live()[0];
    const follower = await start();
    await waitFor(
      async () => (await replicas(follower)).filter((x) => x.ready && x.kind === 'shared').length === 2,
      15_000,
      'the new follower to mirror the fleet',
    );
    traffic!.targets = [leader, follower];
    traffic!.phase = 'two-again';
    await waitFor(() => traffic!.count('two-again') > 3 * SESSIONS, 15_000, 'the new follower to serve the conversations');
    traffic!.phase = 'redis-gone';
    await rd.stop();
    await traffic!.only([follower]);
    leader.child.kill('SIGKILL');
    await leader.exited();
    await sleep(5_000);
    await settled('with Redis gone', false);
    const rows = await replicas(follower);
    assert.deepEqual(
      rows.map((x) => [x.kind, x.ready]),
      [
        ['shared', true],
        ['shared', true],
      ],
    );
    checkPhase(t, 'two-again');
    checkPhase(t, 'redis-gone');
  });
});
