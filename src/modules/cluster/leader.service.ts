import { Inject, Injectable, type BeforeApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { RedisService } from './redis.service.js';
import { startJob, stopJobs } from '../../common/jobs.js';

/** Renew when the lease still names this router (ARGV[1] = "id|"); refresh the advertised URL too. */
const RENEW = `local v = redis.call('GET', KEYS[1]) if v and string.sub(v, 1, string.len(ARGV[1])) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2]) return 1 else return 0 end`;
const RELEASE = `local v = redis.call('GET', KEYS[1]) if v and string.sub(v, 1, string.len(ARGV[1])) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;
/**
 * Take a free lease and the next epoch in one step: the epoch key's INCR, but never at or below
 * ARGV[3], the highest epoch this router knows of. A Redis restarted empty has lost the epoch key,
 * and INCR alone would hand out epoch 1 again while an older leader of epoch 2 may still act.
 * When another router holds the lease it returns minus the current epoch, so that every router,
 * follower or not, knows the latest epoch before Redis can lose it.
 */
const ACQUIRE = `if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then local e = redis.call('INCR', KEYS[2]) local k = tonumber(ARGV[3]) if e <= k then e = k + 1 redis.call('SET', KEYS[2], e) end return e end return -(tonumber(redis.call('GET', KEYS[2])) or 0)`;
const FENCED_SET = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[2], ARGV[2]) return 1 else return 0 end`;

export type LeaderListener = (leader: boolean) => void | Promise<void>;

/**
 * Fleet leadership (issue 8): exactly one router acts on the fleet, under a Redis lease with a
 * fencing epoch. Without Redis the router is always the leader. A leader that cannot renew within
 * the lease steps down before another can take over; every fleet-state write is fenced by the epoch.
 */
/** The lease renewal interval, tracked by the ScheduleModule like every job. */
const LEASE_JOB = 'fleet-lease';

@Injectable()
export class LeaderService implements BeforeApplicationShutdown {
  readonly id = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private leader: boolean;
  epoch = 0;
  /** The highest leadership epoch seen anywhere (its own, the shared fleet state's): a new epoch is above it. */
  private knownEpoch = 0;
  private advertise: string;
  private readonly ttlMs: number;
  private lastRenew = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners: LeaderListener[] = [];
  private leaderUrlCache: string | undefined;

  constructor(
    config: RouterConfig,
    private readonly redis: RedisService,
    private readonly scheduler: SchedulerRegistry,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {
    this.leader = !redis.enabled;
    this.ttlMs = config.leaseTtlMs;
    this.advertise = config.advertiseUrl;
  }

  get isLeader(): boolean {
    return this.leader;
  }

  /** Where the current leader says it can be reached (undefined when unknown). */
  get leaderUrl(): string | undefined {
    return this.leader ? this.advertise : this.leaderUrlCache;
  }

  /** An epoch seen in the shared fleet state: the next lease this router takes is above it. */
  observeEpoch(epoch: number): void {
    if (Number.isSafeInteger(epoch) && epoch > this.knownEpoch) this.knownEpoch = epoch;
  }

  onChange(l: LeaderListener): void {
    this.listeners.push(l);
  }

  /**
   * Set the URL after listening (when --port 0 picked one). A leader took its lease before it
   * listened, under port 0: it rewrites the lease at once, so that a follower never names port 0.
   */
  async setAdvertiseUrl(url: string): Promise<void> {
    this.advertise = url;
    if (this.leader && this.redis.enabled) await this.tick();
  }

  private get value(): string {
    return `${this.id}|${this.advertise}`;
  }

  /** Start competing for the lease; resolves after the first attempt. */
  async start(): Promise<void> {
    if (!this.redis.enabled) return;
    await this.tick();
    this.timer = startJob(this.scheduler, LEASE_JOB, Math.max(100, this.ttlMs / 3), () => {
      this.tick().catch((e: unknown) => this.log.error({ err: e }, 'fleet lease tick failed'));
    });
  }

  private async tick(): Promise<void> {
    const c = this.redis.client!;
    const key = this.redis.key('fleet', 'leader');
    try {
      if (this.leader) {
        const ok = (await c.eval(RENEW, 1, key, `${this.id}|`, String(this.ttlMs), this.value)) as number;
        if (ok === 1) this.lastRenew = performance.now();
        else if ((await c.get(key)) === null && (await this.acquire())) {
          // Redis came back empty (or lost the key): nobody else holds the lease, so this router
          // takes it again under a new epoch and keeps leading, its fleet untouched.
          this.log.warn(
            { event: 'leader', epoch: this.epoch, router: this.id },
            `fleet leader: the lease was gone from Redis; took it again (epoch ${this.epoch})`,
          );
        } else await this.set(false, 'the lease was taken by another router');
      } else if (await this.acquire()) {
        await this.set(true, `acquired the fleet lease (epoch ${this.epoch})`);
      } else {
        const holder = await c.get(key);
        this.leaderUrlCache = holder?.split('|')[1];
      }
    } catch (e) {
      // Cannot reach Redis: a leader that cannot renew steps down before its lease can have expired.
      if (this.leader && performance.now() - this.lastRenew > this.ttlMs * 0.8) await this.set(false, `cannot renew the lease: ${(e as Error).message}`);
    }
  }

  /** Take the lease if it is free, under an epoch above every one known; false when another router holds it (its epoch is then known). */
  private async acquire(): Promise<boolean> {
    const c = this.redis.client!;
    const known = Math.max(this.knownEpoch, this.epoch);
    const epoch = (await c.eval(
      ACQUIRE,
      2,
      this.redis.key('fleet', 'leader'),
      this.redis.key('fleet', 'epoch'),
      this.value,
      String(this.ttlMs),
      String(known),
    )) as number;
    if (epoch <= 0) {
      this.observeEpoch(-epoch);
      return false;
    }
    this.epoch = epoch;
    this.observeEpoch(epoch);
    this.lastRenew = performance.now();
    return true;
  }

  private async set(leader: boolean, why: string): Promise<void> {
    if (leader === this.leader) return;
    this.leader = leader;
    this.log.warn({ event: leader ? 'leader' : 'follower', epoch: this.epoch, router: this.id }, `fleet ${leader ? 'leader' : 'follower'}: ${why}`);
    for (const l of this.listeners) {
      try {
        await l(leader);
      } catch (e) {
        this.log.error({ err: e }, 'leadership change handler failed');
      }
    }
  }

  /** Write the shared fleet state, fenced: only while this router's epoch is the current one. */
  async writeFleetState(json: string): Promise<boolean> {
    const c = this.redis.client;
    if (c === undefined || !this.leader) return false;
    try {
      const ok = (await c.eval(FENCED_SET, 2, this.redis.key('fleet', 'epoch'), this.redis.key('fleet', 'state'), String(this.epoch), json)) as number;
      if (ok !== 1) await this.set(false, 'a newer leader epoch exists');
      return ok === 1;
    } catch {
      return false;
    }
  }

  async readFleetState(): Promise<string | undefined> {
    const c = this.redis.client;
    if (c === undefined) return undefined;
    try {
      return (await c.get(this.redis.key('fleet', 'state'))) ?? undefined;
    } catch {
      return undefined;
    }
  }

  /** Hand the lease over at once on a clean shutdown (before the Redis connection closes). */
  async beforeApplicationShutdown(): Promise<void> {
    stopJobs(this.scheduler, LEASE_JOB);
    const c = this.redis.client;
    if (c !== undefined && this.leader && this.redis.up) {
      await c.eval(RELEASE, 1, this.redis.key('fleet', 'leader'), `${this.id}|`).catch(() => undefined);
    }
  }
}
