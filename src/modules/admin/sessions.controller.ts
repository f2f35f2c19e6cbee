import { Body, Delete, Get, HttpCode, Inject, Param, Put, Query, Req } from '@nestjs/common';
import { ApiNoContentResponse, ApiNotFoundResponse, ApiOkResponse, ApiConflictResponse, ApiQuery } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { AdminController } from './admin-api.decorator.js';
import { DomainError } from '../../common/errors/domain-error.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { CLIENT_ID } from '../../common/client-id.js';
import { replacementId } from '../affinity/session-id.js';
import { RegistryService } from '../registry/registry.service.js';
import { RoutingService } from '../routing/routing.service.js';
import { audited } from '../../common/audit/audit.js';
import { PinSessionDto, SessionCountsView, SessionView } from './dto/session.dto.js';

@AdminController('sessions')
export class SessionsController {
  constructor(
    private readonly registry: RegistryService,
    private readonly routing: RoutingService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  @Get()
  @ApiQuery({ name: 'replica', required: false, description: 'count only this replica' })
  @ApiOkResponse({ type: SessionCountsView })
  counts(@Query('replica') replica?: string): SessionCountsView {
    const dir = this.routing.sessions;
    const rows = this.registry.list.filter((r) => replica === undefined || r.name === replica);
    if (replica !== undefined && rows.length === 0) throw new DomainError('unknown_replica', `no replica named '${replica}'`);
    return {
      total: dir.liveCount(this.routing.clock.now()),
      replicas: Object.fromEntries(rows.map((r) => [r.name, r.pins])),
      evictions: { lru: dir.evictedLru, ttl: dir.evictedTtl },
    };
  }

  @Get(':id')
  @ApiOkResponse({ type: SessionView })
  @ApiNotFoundResponse({ description: 'no live pin for this session' })
  get(@Param('id') raw: string): SessionView {
    const id = storedId(raw);
    const now = this.routing.clock.now();
    const l = this.routing.sessions.lookup(id, now);
    if (l.status !== 'live') throw new DomainError('unknown_session', `no live pin for session '${id}'`);
    const wall = Date.now();
    return {
      id,
      replica: l.target.name,
      last_used: new Date(wall - (now - l.lastUsed)).toISOString(),
      expires_at: new Date(wall - (now - l.lastUsed) + this.routing.sessions.ttlMs).toISOString(),
    };
  }

  @Put(':id')
  @ApiOkResponse({ type: SessionView, description: 'pinned; the next turn goes to this replica (X-Router-Affinity: retain)' })
  @ApiNotFoundResponse({ description: 'unknown replica' })
  @ApiConflictResponse({ description: 'the replica is not routable' })
  async pin(@Param('id') raw: string, @Body() body: PinSessionDto, @Req() req: FastifyRequest): Promise<SessionView> {
    const id = storedId(raw);
    return audited(this.log, req, `pin session ${id} to ${body.replica}`, () => {
      const r = this.registry.get(body.replica);
      if (r === undefined) throw new DomainError('unknown_replica', `no replica named '${body.replica}'`);
      if (!r.routable) throw new DomainError('replica_not_routable', `replica '${r.name}' is not routable (state ${r.state})`);
      this.routing.pin(id, r);
      return this.get(id);
    });
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiNoContentResponse({ description: 'unpinned; the next turn is routed as a new session' })
  @ApiNotFoundResponse({ description: 'no live pin for this session' })
  async unpin(@Param('id') raw: string, @Req() req: FastifyRequest): Promise<void> {
    const id = storedId(raw);
    await audited(this.log, req, `unpin session ${id}`, () => {
      if (!this.routing.unpin(id)) throw new DomainError('unknown_session', `no live pin for session '${id}'`);
    });
  }
}

/**
 * The id a session is stored under, as the data plane resolves it (session-id.ts): a valid id as it
 * is, any other (over 128 characters, other characters) as its `h-<sha256>` replacement. So every
 * session a client can create can be read, pinned and unpinned by the id the client sent.
 */
function storedId(id: string): string {
  return CLIENT_ID.test(id) ? id : replacementId(Buffer.from(id, 'utf8'));
}
