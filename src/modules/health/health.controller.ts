import { Controller, Get, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { RegistryService } from '../registry/registry.service.js';
import { LifecycleService } from '../lifecycle/lifecycle.service.js';
import { AdmissionService } from '../routing/admission.service.js';
import { RoutingService } from '../routing/routing.service.js';

/** Router health: pypto-compatible `/health`, plus `/livez` and `/readyz` for orchestrators. */
@ApiExcludeController()
@Controller()
export class HealthController {
  constructor(
    private readonly registry: RegistryService,
    private readonly lifecycle: LifecycleService,
    private readonly admission: AdmissionService,
    private readonly routing: RoutingService,
  ) {}

  @Get('health')
  health(@Res({ passthrough: true }) reply: FastifyReply): Record<string, unknown> {
    const dir = this.routing.sessions;
    const replicas = this.registry.list;
    const ready = this.registry.routableCount();
    void reply.status(ready > 0 ? 200 : 503);
    return {
      status: ready > 0 ? 'ok' : 'no_replicas',
      replicas_ready: ready,
      replicas_total: replicas.length,
      sessions: dir.liveCount(this.routing.clock.now()),
      routed: replicas.reduce((n, r) => n + r.routed, 0),
      affinity_hits: this.routing.affinityHits,
      rejected: this.routing.rejected,
      // Requests waiting for a replica under its max_inflight; counted in no replica's outstanding.
      queued: this.admission.depth,
      replicas: replicas.map((r) => ({
        name: r.name,
        url: r.url,
        ready: r.routable,
        draining: r.draining,
        outstanding: r.outstanding,
        routed: r.routed,
      })),
    };
  }

  @Get('livez')
  livez(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('readyz')
  readyz(@Res({ passthrough: true }) reply: FastifyReply): Record<string, unknown> {
    const routable = this.registry.routableCount();
    const phase = this.lifecycle.phase;
    const ok = phase === 'running' && routable > 0;
    void reply.status(ok ? 200 : 503);
    const degraded = Object.fromEntries(this.lifecycle.degraded);
    return {
      status: ok ? 'ready' : phase === 'running' ? 'no_replicas' : phase,
      phase,
      replicas_routable: routable,
      ...(this.lifecycle.degraded.size > 0 ? { degraded } : {}),
    };
  }
}
