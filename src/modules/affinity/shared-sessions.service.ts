import { Inject, Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { RedisService } from '../cluster/redis.service.js';
import type { PromptChain } from './prefix-hash.js';

/**
 * The shared half of the session store: session → replica name in Redis with the TTL in Redis
 * itself, so several routers agree on where a conversation lives. The in-memory directory stays the
 * read-through cache (and the whole store when no Redis is configured). Failures are swallowed: the
 * router then routes on its local view.
 *
 * Session-less conversations are shared the same way, keyed by the hash of their first turn (the
 * chain's block ending at `minMatch`): one key per conversation, written when its replica changes.
 */
@Injectable()
export class SharedSessions {
  readonly enabled: boolean;
  errors = 0;

  constructor(
    private readonly config: RouterConfig,
    @Inject(RedisService) private readonly redis: RedisService,
  ) {
    this.enabled = redis.enabled;
  }

  /** Read at each use: a config reload changes the session TTL (docs/reload.md). */
  private get ttlMs(): number {
    return this.config.routing.sessionTtlMs;
  }

  /** A local pin younger than this is trusted without asking Redis. */
  get cacheMs(): number {
    return Math.min(1_000, this.ttlMs / 4);
  }

  /** The replica name Redis holds for a session, or undefined (none, or Redis unavailable). */
  async fetch(id: string): Promise<string | undefined> {
    const c = this.redis.client;
    if (c === undefined || !this.redis.up) return undefined;
    try {
      return (await c.get(this.redis.key('s', id))) ?? undefined;
    } catch {
      this.errors++;
      return undefined;
    }
  }

  /** Record (or refresh) a pin; fire and forget. */
  publish(id: string, replica: string): void {
    const c = this.redis.client;
    if (c === undefined || !this.redis.up) return;
    c.set(this.redis.key('s', id), replica, 'PX', this.ttlMs).catch(() => this.errors++);
  }

  /** The replica name Redis holds for a session-less conversation, or undefined. */
  async fetchPrefix(chain: PromptChain): Promise<string | undefined> {
    const c = this.redis.client;
    if (c === undefined || !this.redis.up) return undefined;
    try {
      return (await c.get(this.redis.key('p', firstTurnKey(chain)))) ?? undefined;
    } catch {
      this.errors++;
      return undefined;
    }
  }

  /** Record where a session-less conversation now lives; fire and forget. */
  publishPrefix(chain: PromptChain, replica: string): void {
    const c = this.redis.client;
    if (c === undefined || !this.redis.up) return;
    c.set(this.redis.key('p', firstTurnKey(chain)), replica, 'PX', this.ttlMs).catch(() => this.errors++);
  }

  unpin(id: string): void {
    const c = this.redis.client;
    if (c === undefined || !this.redis.up) return;
    c.del(this.redis.key('s', id)).catch(() => this.errors++);
  }
}

/** A conversation's name across routers: its first turn's chain hash, in base 36. */
export function firstTurnKey(chain: PromptChain): string {
  return (chain.blocks[chain.minMatch - 1] ?? chain.blocks[chain.blocks.length - 1] ?? 0).toString(36);
}
