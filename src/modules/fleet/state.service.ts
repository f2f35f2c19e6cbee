import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { ConfigError } from '../../config/config-error.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { AffinityService } from '../affinity/affinity.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { LeaderService } from '../cluster/leader.service.js';
import { RedisService } from '../cluster/redis.service.js';
import { readStateFile, STATE_VERSION, writeStateFile, type FleetState, type StatePin, type StateReplica } from './state-file.js';

/** How often changed session pins are flushed (SPEC §6: at most 1 s after they change). */
const PIN_FLUSH_MS = 1_000;

/**
 * The `--state-file`: read once at start (a corrupt or future file stops the start with exit 2
 * unless `--discard-state`), written atomically on every fleet change, pins flushed within 1 s.
 * A failing write never stops routing: it is logged once per distinct error and shown in /readyz.
 */
@Injectable()
export class StateService implements OnApplicationShutdown {
  private readonly path: string | undefined;
  private fleet: readonly StateReplica[] = [];
  private epoch = 0;
  private writtenPins = -1;
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
      this.log.warn({ event: 'state_invalid', source: 'redis', problems: r.kind === 'invalid' ? r.problems : [] }, 'ignoring the unreadable fleet state in Redis');
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
      this.log.warn({ event: 'state_discarded', path: this.path }, `--discard-state: not adopting the ${r.state.replicas.length} replicas recorded in ${this.path}`);
      this.epoch = r.state.epoch + 1;
      return undefined;
    }
    this.epoch = r.state.epoch + 1;
    return r.state;
  }

  /** Start flushing changed pins (after adoption). */
  startPinFlush(): void {
    if (this.path === undefined || this.flushTimer !== undefined) return;
    this.flushTimer = setInterval(() => {
      if (this.affinity.directory.version !== this.writtenPins) this.write();
    }, PIN_FLUSH_MS);
    this.flushTimer.unref();
  }

  /** Record a fleet change and write at once (file, and Redis when this router leads). */
  saveFleet(replicas: readonly StateReplica[]): void {
    this.fleet = replicas;
    this.write();
    if (this.redis.enabled && this.leader.isLeader) {
      const shared: FleetState = { version: STATE_VERSION, epoch: this.leader.epoch, written_at: new Date().toISOString(), replicas, sessions: [] };
      void this.leader.writeFleetState(JSON.stringify(shared));
    }
  }

  /** Write the current fleet and pins now. */
  write(): void {
    if (this.path === undefined) return;
    const dir = this.affinity.directory;
    const version = dir.version;
    const owned = new Set(this.fleet.map((r) => r.slot));
    const sessions: StatePin[] = [];
    for (const p of dir.livePins(this.affinity.clock.now())) if (owned.has(p.target.name)) sessions.push({ id: p.id, replica: p.target.name });
    const state: FleetState = { version: STATE_VERSION, epoch: this.epoch, written_at: new Date().toISOString(), replicas: this.fleet, sessions };
    try {
      writeStateFile(this.path, state);
      this.writtenPins = version;
      if (this.lastError !== undefined) {
        this.log.info({ event: 'state_write_recovered', path: this.path }, `state file ${this.path} is written again`);
        this.lastError = undefined;
        this.lifecycle.degraded.delete('state_file');
      }
    } catch (e) {
      const msg = `cannot write state file ${this.path}: ${(e as Error).message}`;
      if (msg !== this.lastError) this.log.error({ event: 'state_write_failed', path: this.path, err: (e as Error).message }, msg);
      this.lastError = msg;
      this.lifecycle.degraded.set('state_file', msg);
    }
  }

  onApplicationShutdown(): void {
    if (this.flushTimer !== undefined) clearInterval(this.flushTimer);
    this.flushTimer = undefined;
  }
}
