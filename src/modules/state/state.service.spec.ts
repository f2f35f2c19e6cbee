import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { ManualClock } from '../../common/clock.fake.js';
import { createAppLogger } from '../../common/logging/logger.js';
import type { RouterConfig } from '../../config/router-config.js';
import type { RoutingService } from '../routing/routing.service.js';
import { SessionDirectory, type PinTarget } from '../affinity/session-directory.js';
import { ReplicaPins } from '../registry/replica-pins.js';
import type { LeaderService } from '../cluster/leader.service.js';
import type { RedisService } from '../cluster/redis.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import type { FleetState, StateReplica } from './state-file.js';
import { StateService } from './state.service.js';
import type { StateWrite } from './loop-hold.js';
import { JOURNAL_LINE_MAX_IDS, journalPathOf } from './state-journal.js';
import type { ConfigError } from '../../config/config-error.js';
import { tempDir } from '../../common/temp-dir.fake.js';
import type { StateMetrics } from './state.metrics.js';

/** Enough pins for a write to span many slices and chunks (state-pins.ts). */
const MANY = 200_000;

const replica = (slot: string): StateReplica => ({
  slot,
  host: 'h',
  devices: [0],
  address: '127.0.0.1',
  port: 8001,
  scheme: 'http',
  pid: null,
  launched_at: null,
  model: null,
});

/** A StateService over a real directory and a real file, with hand-written fakes for the rest. */
function setup(pins: number, path = join(tempDir('ar-statesvc-'), 'state.json'), room = 1_000) {
  const clock = new ManualClock(1_000);
  const directory = new SessionDirectory<PinTarget>(3_600_000, pins + room);
  const targets = { a: { name: 'h-a', pinning: new ReplicaPins() }, b: { name: 'h-b', pinning: new ReplicaPins() } };
  for (let i = 0; i < pins; i++) directory.pin(`s-${i}`, targets.a, clock.now());
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  const lifecycle = new LifecycleService();
  /** What the state-file metrics are told of each write (the test adds its own observers). */
  const reports: Array<(w: StateWrite) => void> = [];
  const metrics = { written: (w: StateWrite) => reports.forEach((r) => r(w)) } as unknown as StateMetrics;
  const svc = new StateService(
    { stateFile: path, discardState: false } as unknown as RouterConfig,
    { sessions: directory, clock } as unknown as RoutingService,
    lifecycle,
    { isLeader: false } as unknown as LeaderService,
    { enabled: false } as unknown as RedisService,
    createAppLogger('info', 'json', sink),
    metrics,
  );
  const tmps = (): string[] => readdirSync(join(path, '..')).filter((f) => f.endsWith('.tmp'));
  const tmpLeft = (): boolean => tmps().length > 0;
  /** True once a write is part-way through the pins: its temporary file holds a first chunk of them. */
  const midWrite = (): boolean => tmps().some((f) => (statSync(join(path, '..', f), { throwIfNoEntry: false })?.size ?? 0) > 256 * 1024);
  const file = (): FleetState => JSON.parse(readFileSync(path, 'utf8')) as FleetState;
  return { svc, path, directory, clock, targets, logs, lifecycle, tmpLeft, midWrite, file, reports };
}

/** A snapshot of one replica's fleet on disk, then the 1 s pin flush running (stopped by onApplicationShutdown). */
async function startFlushing(s: ReturnType<typeof setup>): Promise<void> {
  s.svc.saveFleet([replica('h-a')]);
  await s.svc.settled();
  s.svc.startPinFlush();
}

/** Polls (a turn of the event loop at a time) until `cond` holds; fails after `ms`. */
async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await nextTurn();
  }
}

describe('StateService writes', () => {
  it('gives the event loop a turn at least every 10,000 pins while a large state file is written', async () => {
    // Owned pins fill chunks (each written with async I/O); pins of replicas the router does not
    // own are skipped without filling any, so the slices alone must give the loop its turns.
    for (const fleet of [[replica('h-a')], []]) {
      const s = setup(MANY);
      // Count the pins the writer is offered between two turns of the event loop.
      const open = s.directory.openPass.bind(s.directory);
      let sinceTurn = 0;
      let most = 0;
      s.directory.openPass = () => {
        const pass = open();
        const next: typeof pass.next = (now, max, visit) => pass.next(now, max, (id, t) => visit(id, t) && ++sinceTurn > 0);
        return { next, close: () => pass.close() };
      };
      let done = false;
      const turn = (): void => {
        most = Math.max(most, sinceTurn);
        sinceTurn = 0;
        if (!done) setImmediate(turn);
      };
      setImmediate(turn);
      s.svc.saveFleet(fleet);
      await s.svc.settled();
      done = true;
      most = Math.max(most, sinceTurn);
      assert.equal(s.file().sessions.length, fleet.length === 0 ? 0 : MANY);
      assert.ok(most > 0 && most <= 10_000, `${most} pins taken without a turn of the event loop (${fleet.length} owned replicas)`);
    }
  });

  it('writes a fleet change made during a pin flush after it: nothing lost, never two writers on the temporary file', async () => {
    const s = setup(MANY);
    s.svc.saveFleet([replica('h-a')]);
    await until(s.midWrite, 'the first write to be part-way through the pins');
    s.directory.pin('on-b', s.targets.b, s.clock.now());
    s.svc.saveFleet([replica('h-a'), replica('h-b')]);
    await s.svc.settled();
    const f = s.file();
    assert.deepEqual(
      f.replicas.map((r) => r.slot),
      ['h-a', 'h-b'],
    );
    assert.equal(f.sessions.length, MANY + 1);
    assert.deepEqual(f.sessions.at(-1), { id: 'on-b', replica: 'h-b' });
    assert.deepEqual(
      s.logs.filter((l) => l['event'] === 'state_write_failed'),
      [],
    );
    assert.equal(s.tmpLeft(), false);
  });

  it('write() resolves after a write that began after the call, so the final write has the pins made during a flush', async () => {
    const s = setup(MANY);
    s.svc.saveFleet([replica('h-a')]);
    await until(s.midWrite, 'the first write to be part-way through the pins');
    s.directory.pin('late', s.targets.a, s.clock.now());
    await s.svc.write();
    assert.ok(
      s.file().sessions.some((p) => p.id === 'late'),
      'the pin made during the first write is in the file',
    );
  });

  it('shutdown waits for a write in progress to finish', async () => {
    const s = setup(MANY);
    s.svc.saveFleet([replica('h-a')]);
    await until(s.midWrite, 'the write to be part-way through the pins');
    await s.svc.onApplicationShutdown();
    assert.equal(s.tmpLeft(), false, 'no half-written temporary file');
    assert.equal(s.file().sessions.length, MANY);
  });

  it('logs a failing write once per distinct error, shows it in /readyz, and clears it once a write succeeds', async () => {
    const dir = tempDir('ar-statesvc-');
    writeFileSync(join(dir, 'blocker'), 'a regular file where a directory should be');
    const s = setup(10, join(dir, 'blocker', 'state.json'));
    s.svc.saveFleet([replica('h-a')]);
    await s.svc.write();
    await s.svc.write();
    const failed = s.logs.filter((l) => l['event'] === 'state_write_failed');
    assert.equal(failed.length, 1, 'logged once');
    assert.match(s.lifecycle.degraded.get('state_file') ?? '', /ENOTDIR|EEXIST/);
    rmSync(join(dir, 'blocker'));
    mkdirSync(join(dir, 'blocker'));
    await s.svc.write();
    assert.equal(s.logs.filter((l) => l['event'] === 'state_write_recovered').length, 1);
    assert.equal(s.lifecycle.degraded.has('state_file'), false);
    assert.equal(existsSync(s.path), true);
    assert.equal(s.file().sessions.length, 10);
  });
});

describe('StateService journal (flushes cost the pins that changed)', () => {
  const journal = (s: { path: string }): string[] => readFileSync(journalPathOf(s.path), 'utf8').split('\n').slice(0, -1);
  const loaded = (path: string): Array<[string, string]> => {
    const state = setup(0, path).svc.load();
    return (state?.sessions ?? []).map((p) => [p.id, p.replica]);
  };

  it('a pin flush appends one journal line and leaves the snapshot alone; a restart reads both', async () => {
    const s = setup(3);
    s.svc.saveFleet([replica('h-a'), replica('h-b')]);
    await s.svc.settled();
    const snapshot = readFileSync(s.path, 'utf8');
    const token = (JSON.parse(snapshot) as { journal: string }).journal;
    assert.deepEqual(journal(s), [JSON.stringify({ journal: token })]);
    s.svc.startPinFlush();
    try {
      s.directory.pin('new', s.targets.b, s.clock.now());
      s.directory.pin('s-1', s.targets.b, s.clock.now());
      s.directory.unpin('s-2', s.clock.now());
      await until(() => journal(s).length === 2, 'a journal line', 5_000);
      assert.deepEqual(JSON.parse(journal(s)[1]), {
        set: [
          ['new', 'h-b'],
          ['s-1', 'h-b'],
        ],
        del: ['s-2'],
      });
      assert.equal(readFileSync(s.path, 'utf8'), snapshot, 'the snapshot is not rewritten');
      assert.deepEqual(loaded(s.path), [
        ['s-0', 'h-a'],
        ['s-1', 'h-b'],
        ['new', 'h-b'],
      ]);
    } finally {
      await s.svc.onApplicationShutdown();
    }
  });

  it('a write() (fleet change, shutdown) is a new snapshot with a new token and a fresh journal', async () => {
    const s = setup(3);
    s.svc.saveFleet([replica('h-a')]);
    await s.svc.settled();
    const first = s.file().journal;
    s.directory.pin('late', s.targets.a, s.clock.now());
    await s.svc.write();
    const f = s.file();
    assert.notEqual(f.journal, first);
    assert.equal(f.sessions.length, 4);
    assert.deepEqual(journal(s), [JSON.stringify({ journal: f.journal })]);
  });

  it('writes a snapshot instead of a journal line when more ids changed than a line may carry', async () => {
    const s = setup(1, undefined, 100_000);
    await startFlushing(s);
    try {
      for (let i = 0; i <= JOURNAL_LINE_MAX_IDS; i++) s.directory.pin(`burst-${i}`, s.targets.a, s.clock.now());
      await until(() => s.file().sessions.length === JOURNAL_LINE_MAX_IDS + 2, 'the snapshot with the burst', 5_000);
      await s.svc.settled();
      assert.equal(journal(s).length, 1, 'the journal holds its header only');
    } finally {
      await s.svc.onApplicationShutdown();
    }
  });

  it('compacts once the journal outgrows the snapshot (and 1 MiB)', async () => {
    const s = setup(1, undefined, 100_000);
    await startFlushing(s);
    try {
      // ~40,000 ids of ~30 bytes: one line past 1 MiB, below the per-line limit
      for (let i = 0; i < 40_000; i++) s.directory.pin(`a-long-enough-session-id-${i}`, s.targets.a, s.clock.now());
      await until(() => journal(s).length === 2, 'the large journal line', 5_000);
      assert.equal(s.file().sessions.length, 1);
      s.directory.pin('one-more', s.targets.a, s.clock.now());
      await until(() => s.file().sessions.length === 40_002 && journal(s).length === 1, 'the compaction: a snapshot and a fresh journal', 5_000);
    } finally {
      await s.svc.onApplicationShutdown();
    }
  });

  /** A snapshot, then its journal removed under the writer and a pin changed: the next append fails. */
  async function failNextAppend(s: ReturnType<typeof setup>): Promise<void> {
    await startFlushing(s);
    rmSync(journalPathOf(s.path));
    s.directory.pin('after-rm', s.targets.a, s.clock.now());
  }

  it('a failed append (the journal removed under it) is logged, and the next write is a snapshot with a new journal', async () => {
    const s = setup(2);
    try {
      await failNextAppend(s);
      await until(() => s.logs.some((l) => l['event'] === 'state_write_failed'), 'the failed append', 5_000);
      await until(() => s.logs.some((l) => l['event'] === 'state_write_recovered'), 'the snapshot after it', 5_000);
      assert.equal(s.file().sessions.length, 3);
      assert.equal(journal(s).length, 1);
    } finally {
      await s.svc.onApplicationShutdown();
    }
  });

  it('tells its metrics each write: kind, result, time, and how long it held the event loop; a metric that throws changes nothing', async () => {
    const s = setup(MANY);
    const writes: StateWrite[] = [];
    s.reports.push((w) => writes.push(w));
    s.reports.push(() => {
      throw new Error('metrics bug');
    });
    try {
      await failNextAppend(s);
      await until(() => writes.length >= 3, 'a failed append and the snapshot after it', 5_000);
      s.directory.pin('later', s.targets.a, s.clock.now());
      await until(() => writes.length >= 4, 'a journal line', 5_000);
    } finally {
      await s.svc.onApplicationShutdown();
    }
    assert.deepEqual(
      writes.map((w) => `${w.kind}:${w.ok ? 'ok' : 'error'}`),
      ['snapshot:ok', 'journal:error', 'snapshot:ok', 'journal:ok'],
    );
    // The throwing metric is logged, and did not turn a write into a failure (only the removed journal did).
    assert.equal(s.logs.filter((l) => l['event'] === 'state_write_failed').length, 1);
    assert.ok(s.logs.some((l) => l['msg'] === 'state write metrics failed'));
    const [first] = writes;
    // 200,000 pins go out in many slices with the loop free between them: no slice is the whole write.
    assert.ok(first.loopHoldSeconds > 0 && first.loopHoldSeconds < first.seconds / 2, `hold ${first.loopHoldSeconds} s of a ${first.seconds} s write`);
  });

  it('load(): a corrupt journal line stops the start naming <file>:<line>; another snapshot’s journal is ignored with a warning', async () => {
    const s = setup(2);
    s.svc.saveFleet([replica('h-a')]);
    await s.svc.settled();
    const jp = journalPathOf(s.path);
    const head = readFileSync(jp, 'utf8');
    writeFileSync(jp, `${head}{"set":[["x","h-a"]]}\nnot json\n{"del":["x"]}\n`);
    assert.throws(
      () => setup(0, s.path).svc.load(),
      (e: ConfigError) => /state\.json\.journal:3: not valid JSON/.test(e.problems[0]?.message ?? ''),
    );
    writeFileSync(jp, `{"journal":"other"}\n{"set":[["x","h-a"]]}\n`);
    const t = setup(0, s.path);
    assert.equal(t.svc.load()?.sessions.length, 2);
    assert.ok(t.logs.some((l) => l['event'] === 'state_journal_ignored' && l['level'] === 40));
  });
});
