import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { RouterConfig, type AutoscaleSettings } from '../../config/router-config.js';
import { DomainError } from '../../common/errors/domain-error.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { launchHost, poolsOf, samplePool, scaleInChoice, type Pool, type PoolFacts } from './autoscale-pools.js';
import { AutoscaleView } from './autoscale-view.service.js';
import { afterLaunchFailure, afterLaunchReady, decide, NEW_TRACK, type Decision, type PoolTrack } from './autoscale.policy.js';
import { FleetService } from '../fleet/fleet.service.js';
import { traced } from '../../common/tracing/tracing.js';
import { startJob, stopJobs } from '../../common/jobs.js';

const JOB = 'fleet-autoscale';

/** One pool's autoscaler state. */
export interface PoolState {
  /** Replaced by a config reload that changes the pool's hosts (its windows and pending launches stay). */
  pool: Pool;
  track: PoolTrack;
  /** The decision of the last tick (undefined before the first). */
  last: Decision | undefined;
  /** Why the last autoscaler launch of this pool failed, and when (wall clock). */
  lastFailure: { readonly reason: string; readonly at: string } | undefined;
  /** Names of autoscaler launches not yet ready nor failed. */
  readonly pending: Set<string>;
}

/**
 * The autoscaler (contract §6.1): every `autoscale.interval`, on the fleet leader only, samples each
 * model pool, asks the policy (autoscale.policy.ts) and applies its decision: a launch through
 * FleetService (slots, ceiling and audit as for the admin API), or a drain-then-stop of the member
 * holding the fewest sessions. Watches its own launches to back off when they fail. Does nothing
 * while paused (PATCH /fleet/autoscaler), starting up or shutting down.
 */
@Injectable()
export class AutoscalerService implements OnApplicationBootstrap, OnApplicationShutdown {
  /** Read at each use: a config reload changes the values (turning autoscaling on or off needs a restart). */
  get settings(): AutoscaleSettings | undefined {
    return this.config.autoscale;
  }
  private states: PoolState[];
  private pausedFlag = false;
  private busy = false;
  /** Decisions by `direction|reason` (the counter of /metrics). */
  readonly counts = new Map<string, number>();

  constructor(
    private readonly config: RouterConfig,
    private readonly fleet: FleetService,
    private readonly view: AutoscaleView,
    private readonly scheduler: SchedulerRegistry,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {
    this.states = poolsOf(config.hosts).map(newState);
  }

  get enabled(): boolean {
    return this.settings !== undefined;
  }

  get paused(): boolean {
    return this.pausedFlag;
  }

  get pools(): readonly PoolState[] {
    return this.states;
  }

  onApplicationBootstrap(): void {
    if (this.settings === undefined) return;
    startJob(this.scheduler, JOB, this.settings.intervalMs, () => {
      this.tick().catch((e: unknown) => this.log.error({ err: e }, 'autoscale tick failed'));
    });
  }

  onApplicationShutdown(): void {
    stopJobs(this.scheduler, JOB);
  }

  /**
   * After a config reload that changed the hosts: a pool per model again. A model still served
   * keeps its state (windows, pending launches) with its new hosts; a new model starts afresh; a
   * model no host serves any more leaves (its replicas drain with their slots).
   */
  reconfigure(): void {
    const was = new Map(this.states.map((s) => [s.pool.model, s]));
    this.states = poolsOf(this.config.hosts).map((pool) => {
      const kept = was.get(pool.model);
      if (kept === undefined) return newState(pool);
      kept.pool = pool;
      return kept;
    });
  }

  /** After a config reload: the decision period may have changed. */
  reschedule(): void {
    if (!this.scheduler.doesExist('interval', JOB)) return;
    stopJobs(this.scheduler, JOB);
    this.onApplicationBootstrap();
  }

  /** Pause or resume (the admin API). Resuming starts every window afresh. */
  setPaused(paused: boolean): void {
    if (this.settings === undefined) {
      throw new DomainError('autoscale_off', 'autoscaling is not configured: add an "autoscale" section to the config file');
    }
    this.fleet.assertLeader();
    if (paused === this.pausedFlag) return;
    this.pausedFlag = paused;
    for (const s of this.states) s.track = { ...s.track, aboveSince: undefined, belowSince: undefined };
    this.log.info({ event: 'autoscale_paused', paused }, `autoscaler ${paused ? 'paused' : 'resumed'}`);
  }

  /** One round over every pool (the job's call; public for tests). */
  async tick(now = performance.now()): Promise<void> {
    const s = this.settings;
    if (s === undefined || this.busy || this.pausedFlag || !this.view.mayAct) return;
    this.busy = true;
    try {
      for (const state of this.states) await this.step(state, s, now);
    } finally {
      this.busy = false;
    }
  }

  private async step(state: PoolState, s: AutoscaleSettings, now: number): Promise<void> {
    this.settle(state, s, now);
    const facts = this.view.facts();
    const sample = samplePool(state.pool, this.view.table, facts);
    const { decision, track } = decide(sample, state.track, s, now);
    const before = state.last;
    state.track = track;
    state.last = decision;
    this.counts.set(`${decision.direction}|${decision.reason}`, (this.counts.get(`${decision.direction}|${decision.reason}`) ?? 0) + 1);
    const changed = decision.direction !== 'hold' || before?.reason !== decision.reason;
    const fields = {
      event: 'autoscale',
      pool: state.pool.model,
      direction: decision.direction,
      reason: decision.reason,
      current: decision.current,
      desired: decision.desired,
      load: decision.load,
      per_replica: Number(decision.perReplica.toFixed(2)),
      target_inflight: s.targetInflight,
      routable: sample.routable,
      starting: sample.starting,
      leaving: sample.leaving,
      free_slots: sample.freeSlots,
    };
    const text = `autoscale ${state.pool.model}: ${decision.direction} (${decision.reason}); ${decision.current} → ${decision.desired} replicas, load ${decision.load} (${fields.per_replica}/replica, target ${s.targetInflight})`;
    if (changed) this.log.info(fields, text);
    else this.log.debug(fields, text);
    if (decision.direction === 'up' || decision.direction === 'down') {
      const attributes = {
        'affinity_router.model': state.pool.model,
        'affinity_router.reason': decision.reason,
        'affinity_router.current': decision.current,
        'affinity_router.desired': decision.desired,
      };
      await traced(`autoscale.${decision.direction}`, attributes, async () => {
        if (decision.direction === 'up') await this.scaleUp(state, s, facts, now);
        else this.scaleDown(state, facts);
      });
    }
  }

  private async scaleUp(state: PoolState, s: AutoscaleSettings, facts: PoolFacts, now: number): Promise<void> {
    const host = launchHost(state.pool, facts);
    try {
      const [replica] = await this.fleet.launch(1, host);
      if (replica !== undefined) state.pending.add(replica.name);
    } catch (e) {
      this.launchFailed(state, s, now, (e as Error).message);
    }
  }

  private scaleDown(state: PoolState, facts: PoolFacts): void {
    const victim = scaleInChoice(state.pool, this.view.table, facts);
    if (victim === undefined) return;
    this.log.info(
      { event: 'autoscale_remove', pool: state.pool.model, replica: victim.name, sessions: victim.pins, outstanding: victim.outstanding },
      `autoscale ${state.pool.model}: draining ${victim.name} (${victim.pins} live sessions, ${victim.outstanding} in flight), then stopping it`,
    );
    try {
      const { done } = this.fleet.remove(victim.name);
      done.catch((e: unknown) => this.log.error({ err: e, replica: victim.name }, `autoscale removal of ${victim.name} failed`));
    } catch (e) {
      this.log.error({ event: 'autoscale_remove_failed', replica: victim.name, err: (e as Error).message }, `autoscale could not remove ${victim.name}`);
    }
  }

  /** The outcome of this pool's pending launches: ready (back-off forgotten) or failed (back-off grows). */
  private settle(state: PoolState, s: AutoscaleSettings, now: number): void {
    for (const name of [...state.pending]) {
      const r = this.view.replica(name);
      if (r?.everReady === true) {
        state.pending.delete(name);
        state.track = afterLaunchReady(state.track);
      } else if (r === undefined || r.failed) {
        state.pending.delete(name);
        const report = this.fleet.failures.find((f) => f.name === name);
        this.launchFailed(state, s, now, report?.reason ?? 'the replica went away before it was ready');
      }
    }
  }

  private launchFailed(state: PoolState, s: AutoscaleSettings, now: number, reason: string): void {
    state.track = afterLaunchFailure(state.track, s, now);
    state.lastFailure = { reason, at: new Date().toISOString() };
    const retryInMs = Math.round((state.track.retryAt ?? now) - now);
    this.counts.set('up|launch_failed', (this.counts.get('up|launch_failed') ?? 0) + 1);
    this.log.error(
      { event: 'autoscale_launch_failed', pool: state.pool.model, failures: state.track.failures, retry_in_ms: retryInMs, err: reason },
      `autoscale ${state.pool.model}: launch failed (${state.track.failures} in a row): ${reason}; next try in ${retryInMs / 1000} s at the earliest`,
    );
  }
}

function newState(pool: Pool): PoolState {
  return { pool, track: NEW_TRACK, last: undefined, lastFailure: undefined, pending: new Set() };
}
