import { existsSync } from 'node:fs';
import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { ConfigError } from '../../config/config-error.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { RoutingService } from '../routing/routing.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { LeaderService } from '../cluster/leader.service.js';
import { RedisService } from '../cluster/redis.service.js';
import type { PinChanges } from '../affinity/pin-changes.js';
import type { PinTarget } from '../affinity/session-directory.js';
import type { Replica } from '../registry/replica.js';
import { readStateFile, STATE_VERSION, writeStateFile, type FleetState, type StateHead, type StateReplica } from './state-file.js';
import {
  createJournal,
  encodeJournalLine,
  JOURNAL_LINE_MAX_IDS,
  journalPathOf,
  JournalAppender,
  newJournalToken,
  readJournal,
  type TakenChanges,
} from './state-journal.js';
import { LoopHold } from './loop-hold.js';
import { pinChunks } from './state-pins.js';
import { StateMetrics } from './state.metrics.js';

/** How often changed session pins are flushed (contract §6: at most 1 s after they change). */
const PIN_FLUSH_MS = 1_000;
/** The journal is compacted (a new snapshot) once it outgrows the snapshot, or this, whichever is larger. */
const JOURNAL_COMPACT_FLOOR = 1024 * 1024;

/**
 * The `--state-file`: read once at start (a corrupt or future file stops the start with exit 2
 * unless `--discard-state`), a full snapshot written atomically on every fleet change, at start
 * after adoption and at shutdown, and the pins changed since then appended to its journal
 * (state-journal.ts) at most 1 s after they change, so a flush costs what changed, not every pin
 * held. The journal is compacted into a new snapshot when it outgrows the last one. Writes never
 * block the event loop and run one at a time. A failing write never stops routing: it is logged
 * once per distinct error and shown in /readyz, and the next write is a full snapshot.
 */
@Injectable()
export class StateService implements OnApplicationShutdown {
  private readonly path: string | undefined;
  private readonly journalPath: string | undefined;
  /** The journal's file handle, kept open between flushes (closed when a snapshot replaces the journal). */
  private readonly appender: JournalAppender | undefined;
  private readonly changes: PinChanges<Replica> | undefined;
  private fleet: readonly StateReplica[] = [];
  private epoch = 0;
  /**
   * The next write must be a full snapshot: asked for, or the journal on disk is not the last
   * snapshot's to append to (none yet, or a write failed part-way). Writes run one at a time, so
   * between two writes this alone says whether the journal takes appends.
   */
  private snapshotDue = true;
  private snapshotBytes = 0;
  private journalBytes = 0;
  /** The write in flight, and the one that starts when it ends (serving every call made meanwhile). */
  private writing: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  private lastError: string | undefined;
  private flushTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: RouterConfig,
    private readonly routing: RoutingService,
    private readonly lifecycle: LifecycleService,
    private readonly leader: LeaderService,
    private readonly redis: RedisService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
    private readonly metrics: StateMetrics,
  ) {
    this.path = config.stateFile;
    if (this.path === undefined) return;
    this.journalPath = journalPathOf(this.path);
    this.appender = new JournalAppender(this.journalPath);
    this.changes = routing.sessions.trackChanges(JOURNAL_LINE_MAX_IDS);
  }

  /** Fleet changes are recorded somewhere (a state file, or Redis for the other routers). */
  get enabled(): boolean {
    return this.path !== undefined || this.redis.enabled;
  }

  /** A `--state-file` is written (not only Redis). */
  get writesFile(): boolean {
    return this.path !== undefined;
  }

  /** The fleet the current leader recorded in Redis, if any. */
  async loadShared(): Promise<FleetState | undefined> {
    const json = await this.leader.readFleetState();
    if (json === undefined) return undefined;
    const r = readStateFile('redis', () => json);
    if (r.kind !== 'ok') {
      this.log.warn(
        { event: 'state_invalid', source: 'redis', problems: r.kind === 'invalid' ? r.problems : [] },
        'ignoring the unreadable fleet state in Redis',
      );
      return undefined;
    }
    return r.state;
  }

  /** The recorded state with its journal applied, or undefined when there is none (no file, or --discard-state). */
  load(): FleetState | undefined {
    if (this.path === undefined || this.journalPath === undefined) return undefined;
    const r = readStateFile(this.path);
    if (r.kind === 'missing') {
      if (existsSync(this.journalPath)) {
        this.log.warn(
          { event: 'state_journal_ignored', path: this.journalPath },
          `ignoring the journal ${this.journalPath}: there is no state file ${this.path}`,
        );
      }
      return undefined;
    }
    if (r.kind === 'invalid') {
      if (!this.config.discardState) throw new ConfigError(r.problems);
      this.log.warn({ event: 'state_discarded', path: this.path, problems: r.problems }, `ignoring the unreadable state file ${this.path} (--discard-state)`);
      return undefined;
    }
    this.epoch = r.state.epoch + 1;
    if (this.config.discardState) {
      this.log.warn(
        { event: 'state_discarded', path: this.path },
        `--discard-state: not adopting the ${r.state.replicas.length} replicas recorded in ${this.path} (nor its journal)`,
      );
      return undefined;
    }
    const j = readJournal(this.journalPath, r.state);
    if (j.kind === 'invalid') throw new ConfigError(j.problems);
    if (j.note !== undefined) this.log[j.note.level]({ event: j.note.event, path: this.journalPath }, j.note.message);
    if (j.applied > 0) this.log.info({ event: 'state_journal_applied', path: this.journalPath, lines: j.applied }, `applied ${j.applied} journal lines`);
    return j.state;
  }

  /** Start flushing changed pins (after adoption). */
  startPinFlush(): NodeJS.Timeout | undefined {
    if (this.path === undefined || this.flushTimer !== undefined) return undefined;
    this.flushTimer = setInterval(() => {
      if (this.queued === undefined && (this.snapshotDue || this.changes?.pending === true)) this.writeSoon(false);
    }, PIN_FLUSH_MS);
    this.flushTimer.unref();
    return this.flushTimer;
  }

  /** Record a fleet change and write at once (file, and Redis when this router leads). */
  saveFleet(replicas: readonly StateReplica[]): void {
    this.fleet = replicas;
    this.writeSoon(true);
    if (this.redis.enabled && this.leader.isLeader) {
      const shared: FleetState = { version: STATE_VERSION, epoch: this.leader.epoch, written_at: new Date().toISOString(), replicas, sessions: [] };
      this.leader.writeFleetState(JSON.stringify(shared)).catch((e: unknown) => {
        this.log.warn({ event: 'fleet_state_publish_failed', err: (e as Error).message }, `cannot publish the fleet state to Redis: ${(e as Error).message}`);
      });
    }
  }

  /**
   * Write a full snapshot of the current fleet and pins (and start a new journal). One write runs
   * at a time: calls made during one are served by a single write that starts when it ends
   * (reading the fleet and pins then), so no change is lost and no two writers share a temporary
   * file. Resolves once a write that started after this call is done; never rejects (failures are
   * logged and shown in /readyz).
   */
  write(): Promise<void> {
    this.snapshotDue = true;
    return this.schedule();
  }

  private schedule(): Promise<void> {
    if (this.path === undefined) return Promise.resolve();
    if (this.queued !== undefined) return this.queued;
    if (this.writing === undefined) return this.start(this.path);
    const path = this.path;
    this.queued = this.writing.then(() => {
      this.queued = undefined;
      return this.start(path);
    });
    return this.queued;
  }

  /** A snapshot (`write()`) or a flush of the changed pins, for callers that do not wait for it. */
  private writeSoon(snapshot: boolean): void {
    // Neither rejects; this catch only keeps a bug in them from becoming an unhandled rejection.
    (snapshot ? this.write() : this.schedule()).catch((e: unknown) => this.log.error({ err: e }, 'state file write failed'));
  }

  /** Resolves once every write asked for so far is done. */
  settled(): Promise<void> {
    return this.queued ?? this.writing ?? Promise.resolve();
  }

  private start(path: string): Promise<void> {
    const p = this.writeNow(path).finally(() => {
      if (this.writing === p) this.writing = undefined;
    });
    this.writing = p;
    return p;
  }

  /**
   * One write: the changes are taken first, so a change made while it runs goes to the next one.
   * A snapshot when one is due (asked for, or the journal cannot take appends), too many ids changed for one line,
   * or the journal has outgrown the snapshot; otherwise one journal line.
   */
  private async writeNow(path: string): Promise<void> {
    const taken = this.changes?.take();
    const snapshot = this.snapshotDue || taken === undefined || taken.overflowed || this.journalBytes > Math.max(this.snapshotBytes, JOURNAL_COMPACT_FLOOR);
    this.snapshotDue = false;
    const owned = new Set(this.fleet.map((r) => r.slot));
    const replicaOf = (t: PinTarget): string | undefined => (owned.has(t.name) ? t.name : undefined);
    const hold = new LoopHold();
    let ok = true;
    try {
      if (snapshot) await this.snapshot(path, replicaOf, hold);
      else if (!(await this.append(taken, replicaOf, hold))) return;
      if (this.lastError !== undefined) {
        this.log.info({ event: 'state_write_recovered', path }, `state file ${path} is written again`);
        this.lastError = undefined;
        this.lifecycle.recovered('state_file');
      }
    } catch (e) {
      // The changes taken are not on disk, and a journal may end in a part of a line: start afresh.
      this.snapshotDue = true;
      await this.appender?.close();
      const msg = `cannot write state file ${path}: ${(e as Error).message}`;
      if (msg !== this.lastError) this.log.error({ event: 'state_write_failed', path, err: (e as Error).message }, msg);
      this.lastError = msg;
      this.lifecycle.degrade('state_file', msg);
      ok = false;
    }
    // After the write is settled: a metric that throws must not turn a written line into a failed write.
    try {
      this.metrics.written(hold.written(snapshot ? 'snapshot' : 'journal', ok));
    } catch (e) {
      this.log.error({ err: e }, 'state write metrics failed');
    }
  }

  /** Compaction: the full snapshot under a new token, then a fresh journal for it. */
  private async snapshot(path: string, replicaOf: (t: PinTarget) => string | undefined, hold: LoopHold): Promise<void> {
    const dir = this.routing.sessions;
    const clock = this.routing.clock;
    const token = newJournalToken();
    const head: StateHead = { version: STATE_VERSION, epoch: this.epoch, written_at: new Date().toISOString(), journal: token, replicas: this.fleet };
    await this.appender?.close(); // from the rename on, the old journal is not this snapshot's
    this.snapshotBytes = await writeStateFile(
      path,
      head,
      pinChunks(
        () => dir.openPass(),
        () => clock.now(),
        replicaOf,
        hold,
      ),
    );
    if (this.journalPath === undefined) return;
    this.journalBytes = await createJournal(this.journalPath, token);
  }

  /** One journal line for the ids changed and the replicas released since the last write; false when there was nothing to write. */
  private async append(taken: TakenChanges<Replica>, replicaOf: (t: PinTarget) => string | undefined, hold: LoopHold): Promise<boolean> {
    const dir = this.routing.sessions;
    const now = this.routing.clock.now();
    const line = await encodeJournalLine(
      taken,
      (t) => t.name,
      (id) => {
        const p = dir.lookup(id, now);
        return p.status === 'live' ? replicaOf(p.target) : undefined;
      },
      hold,
    );
    if (line === undefined || this.appender === undefined) return false;
    await this.appender.append(line);
    this.journalBytes += line.length;
    return true;
  }

  /** Stops the flush timer and lets a write in progress finish (the drain step wrote the last one). */
  async onApplicationShutdown(): Promise<void> {
    if (this.flushTimer !== undefined) clearInterval(this.flushTimer);
    this.flushTimer = undefined;
    await this.settled();
    await this.appender?.close();
  }
}
