import { ApiProperty } from '@nestjs/swagger';
import { IsBoolean } from 'class-validator';
import type { AutoscalerService } from '../../autoscale/autoscaler.service.js';

export class PatchAutoscalerDto {
  @ApiProperty({ example: true, description: 'true: the autoscaler stops deciding (nothing it started is undone); false: it resumes with fresh windows' })
  @IsBoolean()
  readonly paused!: boolean;
}

export class AutoscaleSettingsView {
  @ApiProperty({ example: 1 }) readonly min!: number;
  @ApiProperty({ example: 4 }) readonly max!: number;
  @ApiProperty({ example: 8 }) readonly target_inflight!: number;
  @ApiProperty({ example: 10, description: 'seconds' }) readonly interval!: number;
  @ApiProperty({ example: 30, description: 'seconds' }) readonly up_after!: number;
  @ApiProperty({ example: 300, description: 'seconds' }) readonly down_after!: number;
}

export class AutoscaleFailureView {
  @ApiProperty({ example: 'launch failed: slot g-d1: cannot start ...' }) readonly reason!: string;
  @ApiProperty({ example: '2026-12-02T16:05:00.000Z' }) readonly at!: string;
}

export class AutoscalePoolView {
  @ApiProperty({ example: 'llama-3-8b', description: "the model the pool's hosts serve (served_model_name, else model)" }) readonly pool!: string;
  @ApiProperty({ example: ['node'], type: [String] }) readonly hosts!: string[];
  @ApiProperty({ example: 2, nullable: true, type: Number, description: 'members holding a slot and not leaving, at the last tick' })
  readonly current!: number | null;
  @ApiProperty({ example: 3, nullable: true, type: Number, description: 'ceil(load / target_inflight) within [min, max], at the last tick' })
  readonly desired!: number | null;
  @ApiProperty({ example: 7, nullable: true, type: Number, description: 'in-flight + queued requests on the routable members' })
  readonly load!: number | null;
  @ApiProperty({ example: 'up', nullable: true, type: String, enum: ['up', 'down', 'hold'] }) readonly direction!: string | null;
  @ApiProperty({ example: 'load_above_target', nullable: true, type: String }) readonly reason!: string | null;
  @ApiProperty({ example: 0, description: 'autoscaler launches that failed in a row' }) readonly failures!: number;
  @ApiProperty({ example: null, nullable: true, type: Number, description: 'seconds until the next launch may be tried (back-off)' })
  readonly retry_in!: number | null;
  @ApiProperty({ type: AutoscaleFailureView, nullable: true }) readonly last_failure!: AutoscaleFailureView | null;
}

export class AutoscalerView {
  @ApiProperty({ example: true, description: 'an "autoscale" section is configured' }) readonly enabled!: boolean;
  @ApiProperty({ example: false }) readonly paused!: boolean;
  @ApiProperty({ example: true, description: 'only the fleet leader scales' }) readonly leader!: boolean;
  @ApiProperty({ type: AutoscaleSettingsView, nullable: true }) readonly settings!: AutoscaleSettingsView | null;
  @ApiProperty({ type: [AutoscalePoolView] }) readonly pools!: AutoscalePoolView[];
}

/** The autoscaler as GET /fleet and PATCH /fleet/autoscaler show it. */
export function autoscalerView(a: AutoscalerService, leader: boolean, now = performance.now()): AutoscalerView {
  const s = a.settings;
  return {
    enabled: s !== undefined,
    paused: a.paused,
    leader,
    settings:
      s === undefined
        ? null
        : {
            min: s.min,
            max: s.max,
            target_inflight: s.targetInflight,
            interval: s.intervalMs / 1000,
            up_after: s.upAfterMs / 1000,
            down_after: s.downAfterMs / 1000,
          },
    pools:
      s === undefined
        ? []
        : a.pools.map((p) => ({
            pool: p.pool.model,
            hosts: [...p.pool.hosts],
            current: p.last?.current ?? null,
            desired: p.last?.desired ?? null,
            load: p.last?.load ?? null,
            direction: p.last?.direction ?? null,
            reason: p.last?.reason ?? null,
            failures: p.track.failures,
            retry_in: p.track.retryAt !== undefined && p.track.retryAt > now ? Math.ceil((p.track.retryAt - now) / 100) / 10 : null,
            last_failure: p.lastFailure ?? null,
          })),
  };
}
