import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { ConfigError } from '../../config/config-error.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { AffinityService } from '../affinity/affinity.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { LeaderService } from '../cluster/leader.service.js';
import { RedisService } from '../cluster/redis.service.js';
import { readStateFile, STATE_VERSION, writeStateFile, type FleetState, type StateHead, type StateReplica } from './state-file.js';
import { pinChunks } from './state-pins.js';

/** How often changed session pins are flushed (SPEC §6: at most 1 s after they change). */
const PIN_FLUSH_MS = 1_000;

/**
 * The `--state-file`: read once at start (a corrupt or future file stops the start with exit 2
 * unless `--discard-state`), written atomically on every fleet change, pins flushed within 1 s.
 * Writes never block the event loop (pins are encoded a slice at a time, the file written with
 * async fs) and run one at a time. A failing write never stops routing: it is logged once per
 * distinct error and shown in /readyz.
 */
@Injectable()
export class StateService implements OnApplicationShutdown {
  private readonly path: string | undefined;
  private fleet: readonly StateReplica[] = [];
  private epoch = 0;
  /** Directory version of the last pins written, and of the write in flight. */
  private writtenPins = -1;
  private writingPins = -1;
  /** The write in flight, and the one that starts when it ends (serving every call made meanwhile). */
  private writing: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  private lastError: string | undefined;
  private flushTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: RouterConfig,
    private readonly affinity: AffinityService,
    private readonly lifecycle: LifecycleService,
    private readonly leader: LeaderService,
    private readonly redis: RedisService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {
    this.path = config.stateFile;
  }

  /** Fleet changes are recorded somewhere (a state file, or Redis for the other routers). */
  get enabled(): boolean {
    return this.path !== undefined || this.redis.enabled;
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

  /** The recorded state, or undefined when there is none (no file, or --discard-state). */
  load(): FleetState | undefined {
    if (this.path === undefined) return undefined;
    const r = readStateFile(this.path);
    if (r.kind === 'missing') return undefined;
    if (r.kind === 'invalid') {
      if (!this.config.discardState) throw new ConfigError(r.problems);
      this.log.warn({ event: 'state_discarded', path: this.path, problems: r.problems }, `ignoring the unreadable state file ${this.path} (--discard-state)`);
      return undefined;
    }
    if (this.config.discardState) {
      this.log.warn(
        { event: 'state_discarded', path: this.path },
        `--discard-state: not adopting the ${r.state.replicas.length} replicas recorded in ${this.path}`,
      );
      this.epoch = r.state.epoch + 1;
      return undefined;
    }
    this.epoch = r.state.epoch + 1;
    return r.state;
  }

  /** Start flushing changed pins (after adoption). */
  startPinFlush(): NodeJS.Timeout | undefined {
    if (this.path === undefined || this.flushTimer !== undefined) return undefined;
    this.flushTimer = setInterval(() => {
      const covered = this.writing !== undefined ? this.writingPins : this.writtenPins;
      if (this.queued === undefined && this.affinity.directory.version !== covered) this.writeSoon();
    }, PIN_FLUSH_MS);
    this.flushTimer.unref();
    return this.flushTimer;
  }

  /** Record a fleet change and write at once (file, and Redis when this router leads). */
  saveFleet(replicas: readonly StateReplica[]): void {
    this.fleet = replicas;
    this.writeSoon();
    if (this.redis.enabled && this.leader.isLeader) {
      const shared: FleetState = { version: STATE_VERSION, epoch: this.leader.epoch, written_at: new Date().toISOString(), replicas, sessions: [] };
      this.leader.writeFleetState(JSON.stringify(shared)).catch((e: unknown) => {
        this.log.warn({ event: 'fleet_state_publish_failed', err: (e as Error).message }, `cannot publish the fleet state to Redis: ${(e as Error).message}`);
      });
    }
  }

  /**
   * Write the current fleet and pins. One write runs at a time: calls made during one are served
   * by a single write that starts when it ends (reading the fleet and pins then), so no change is
   * lost and no two writers share the temporary file. Resolves once a write that started after
   * this call is done; never rejects (failures are logged and shown in /readyz).
   */
  write(): Promise<void> {
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

  /** `write()` for callers that do not wait for it. */
  private writeSoon(): void {
    // write() never rejects; this catch only keeps a bug in it from becoming an unhandled rejection.
    this.write().catch((e: unknown) => this.log.error({ err: e }, 'state file write failed'));
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

  private async writeNow(path: string): Promise<void> {
    const dir = this.affinity.directory;
    const clock = this.affinity.clock;
    const version = (this.writingPins = dir.version);
    const owned = new Set(this.fleet.map((r) => r.slot));
    const head: StateHead = { version: STATE_VERSION, epoch: this.epoch, written_at: new Date().toISOString(), replicas: this.fleet };
    try {
      await writeStateFile(
        path,
        head,
        pinChunks(
          () => dir.openPass(),
          () => clock.now(),
          (t) => (owned.has(t.name) ? t.name : undefined),
        ),
      );
      this.writtenPins = version;
      if (this.lastError !== undefined) {
        this.log.info({ event: 'state_write_recovered', path }, `state file ${path} is written again`);
        this.lastError = undefined;
        this.lifecycle.recovered('state_file');
      }
    } catch (e) {
      const msg = `cannot write state file ${path}: ${(e as Error).message}`;
      if (msg !== this.lastError) this.log.error({ event: 'state_write_failed', path, err: (e as Error).message }, msg);
      this.lastError = msg;
      this.lifecycle.degrade('state_file', msg);
    }
  }

  /** Stops the flush timer and lets a write in progress finish (the drain step wrote the last one). */
  async onApplicationShutdown(): Promise<void> {
    if (this.flushTimer !== undefined) clearInterval(this.flushTimer);
    this.flushTimer = undefined;
    await this.settled();
  }
}
