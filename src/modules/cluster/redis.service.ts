import { createRequire } from 'node:module';

import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';

/** A Redis command never holds a request longer than this; past it the router acts on local state. */
export const REDIS_COMMAND_TIMEOUT_MS = 100;

/** How long start-up waits for Redis before the router listens without it (its connect timeout). */
export const REDIS_START_WAIT_MS = 2_000;

/**
 * The shared Redis connection (`--redis-url`), or none. It never fails a request: commands have a
 * short timeout, nothing is queued while disconnected, and reachability is exposed in /readyz
 * (`degraded.redis`) and /metrics. Transitions are logged once each.
 */
@Injectable()
export class RedisService implements OnModuleInit, OnApplicationShutdown {
  readonly client: Redis | undefined;
  readonly prefix: string;
  private isUp = false;

  constructor(
    config: RouterConfig,
    private readonly lifecycle: LifecycleService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {
    this.prefix = config.redisPrefix;
    if (config.redisUrl === undefined) return;
    this.lifecycle.degrade('redis', 'connecting');
    // Loaded only when asked for: a router without --redis-url does not carry the client (memory).
    const { Redis: RedisClient } = createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
    this.client = new RedisClient(config.redisUrl, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
      connectTimeout: 2_000,
      retryStrategy: (times) => Math.min(times * 200, 2_000),
      lazyConnect: false,
    });
    this.client.on('ready', () => this.setUp(true));
    this.client.on('end', () => this.setUp(false, 'connection closed'));
    this.client.on('close', () => this.setUp(false, 'connection closed'));
    this.client.on('error', (e: Error) => this.setUp(false, e.message));
  }

  get enabled(): boolean {
    return this.client !== undefined;
  }

  get up(): boolean {
    return this.isUp;
  }

  key(...parts: string[]): string {
    return this.prefix + parts.join(':');
  }

  /**
   * Start-up waits (at most {@link REDIS_START_WAIT_MS}) for the connection, so the router's first
   * requests already see where other routers placed conversations: a router joining a fleet, or
   * restarting, listened before Redis was ready and placed its first conversations on local state
   * alone. Past the wait it starts degraded, as when Redis goes away later.
   */
  async onModuleInit(): Promise<void> {
    const c = this.client;
    if (c === undefined || this.isUp) return;
    await new Promise<void>((done) => {
      const finish = (): void => {
        clearTimeout(timer);
        c.off('ready', finish);
        done();
      };
      const timer = setTimeout(finish, REDIS_START_WAIT_MS);
      c.once('ready', finish);
    });
  }

  private setUp(up: boolean, why = ''): void {
    if (up === this.isUp) return;
    this.isUp = up;
    if (up) {
      this.lifecycle.recovered('redis');
      this.log.info({ event: 'redis_up' }, 'Redis reachable: sessions and fleet state are shared');
    } else {
      this.lifecycle.degrade('redis', `unreachable: ${why}`);
      this.log.warn({ event: 'redis_down', err: why }, `Redis unreachable (${why}): routing on local state until it returns`);
    }
  }

  onApplicationShutdown(): void {
    if (this.client === undefined) return;
    this.client.disconnect(false);
  }
}
