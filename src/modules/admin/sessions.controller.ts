import { Body, Delete, Get, HttpCode, Inject, Param, Put, Query, Req } from '@nestjs/common';
import { ApiNoContentResponse, ApiNotFoundResponse, ApiOkResponse, ApiConflictResponse, ApiQuery } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { AdminController } from './admin-api.decorator.js';
import { DomainError } from '../../common/errors/domain-error.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { AffinityService } from '../affinity/affinity.service.js';
import { CLIENT_ID } from '../../common/client-id.js';
import { RegistryService } from '../registry/registry.service.js';
import { RoutingService } from '../routing/routing.service.js';
import { audited } from '../../common/audit/audit.js';
import { PinSessionDto, SessionCountsView, SessionView } from './dto/session.dto.js';

@AdminController('sessions')
export class SessionsController {
  constructor(
    private readonly affinity: AffinityService,
    private readonly registry: RegistryService,
    private readonly routing: RoutingService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  @Get()
  @ApiQuery({ name: 'replica', required: false, description: 'count only this replica' })
  @ApiOkResponse({ type: SessionCountsView })
  counts(@Query('replica') replica?: string): SessionCountsView {
    const dir = this.affinity.directory;
    const rows = this.registry.list.filter((r) => replica === undefined || r.name === replica);
    if (replica !== undefined && rows.length === 0) throw new DomainError('unknown_replica', `no replica named '${replica}'`);
    return {
      total: dir.liveCount(this.affinity.clock.now()),
      replicas: Object.fromEntries(rows.map((r) => [r.name, r.pins])),
      evictions: { lru: dir.evictedLru, ttl: dir.evictedTtl },
    };
  }

  @Get(':id')
  @ApiOkResponse({ type: SessionView })
  @ApiNotFoundResponse({ description: 'no live pin for this session' })
  get(@Param('id') id: string): SessionView {
    checkId(id);
    const now = this.affinity.clock.now();
    const l = this.affinity.directory.lookup(id, now);
    if (l.status !== 'live') throw new DomainError('unknown_session', `no live pin for session '${id}'`);
    const wall = Date.now();
    return {
      id,
      replica: l.target.name,
      last_used: new Date(wall - (now - l.lastUsed)).toISOString(),
      expires_at: new Date(wall - (now - l.lastUsed) + this.affinity.directory.ttlMs).toISOString(),
    };
  }

  @Put(':id')
  @ApiOkResponse({ type: SessionView, description: 'pinned; the next turn goes to this replica (X-Router-Affinity: retain)' })
  @ApiNotFoundResponse({ description: 'unknown replica' })
  @ApiConflictResponse({ description: 'the replica is not routable' })
  async pin(@Param('id') id: string, @Body() body: PinSessionDto, @Req() req: FastifyRequest): Promise<SessionView> {
    return audited(this.log, req, `pin session ${id} to ${body.replica}`, () => {
      checkId(id);
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
  async unpin(@Param('id') id: string, @Req() req: FastifyRequest): Promise<void> {
    await audited(this.log, req, `unpin session ${id}`, () => {
      checkId(id);
      if (!this.routing.unpin(id)) throw new DomainError('unknown_session', `no live pin for session '${id}'`);
    });
  }
}

function checkId(id: string): void {
  if (!CLIENT_ID.test(id)) {
    throw new DomainError('unknown_session', `session id must match [A-Za-z0-9._:-]{1,128}; the router stores bad ids under their h-<sha256> replacement`);
  }
}
