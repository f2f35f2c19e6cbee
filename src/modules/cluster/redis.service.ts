import { createRequire } from 'node:module';

import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';

/** A Redis command never holds a request longer than this; past it the router acts on local state. */
export const REDIS_COMMAND_TIMEOUT_MS = 100;

/**
 * The shared Redis connection (`--redis-url`), or none. It never fails a request: commands have a
 * short timeout, nothing is queued while disconnected, and reachability is exposed in /readyz
 * (`degraded.redis`) and /metrics. Transitions are logged once each.
 */
@Injectable()
export class RedisService implements OnApplicationShutdown {
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
