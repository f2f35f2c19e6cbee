import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import type { Replica } from '../../registry/replica.js';
import type { Capacity } from '../../fleet/slot-table.js';

export class HealthView {
  @ApiProperty({ example: true }) readonly ok!: boolean;
  @ApiProperty({ example: '2026-12-02T16:00:00.000Z' }) readonly at!: string;
  @ApiPropertyOptional({ example: 200 }) readonly status?: number;
  @ApiPropertyOptional({ example: 'connect ECONNREFUSED 127.0.0.1:8001' }) readonly error?: string;
}

export class CapacityView {
  @ApiProperty({ example: 2, description: 'launched and adopted replicas holding a slot' }) readonly owned!: number;
  @ApiProperty({ example: 3, description: 'min(declared slots, --max-replicas)' }) readonly ceiling!: number;
  @ApiProperty({ example: ['node-d2'], type: [String], description: 'slots a launch may take now' }) readonly free_slots!: string[];
}

export class SpeedView {
  @ApiProperty({
    example: 0.42,
    nullable: true,
    type: Number,
    description:
      'expected seconds in flight per request (median of its last 16 answers), as of the last routing decision (decays towards the fleet median without new samples); null: fewer than 8 answers yet',
  })
  readonly seconds_per_request!: number | null;
  @ApiProperty({
    example: 1,
    description: 'seconds_per_request over the fleet median, exactly 1 within 1.5x or 50 ms; load comparisons weigh its in-flight count by it',
  })
  readonly slowness!: number;
}

export class ReplicaView {
  @ApiProperty({ example: 'node-d0' }) readonly name!: string;
  @ApiProperty({ example: 'http://127.0.0.1:8001' }) readonly url!: string;
  @ApiProperty({ example: true, description: 'routable: ready and not draining' }) readonly ready!: boolean;
  @ApiProperty({ example: false }) readonly draining!: boolean;
  @ApiProperty({ example: true, description: 'launched or adopted by this router' }) readonly owned!: boolean;
  @ApiProperty({ example: 0 }) readonly outstanding!: number;
  @ApiProperty({ example: 42 }) readonly routed!: number;
  @ApiProperty({ example: 'launched', enum: ['static', 'launched', 'adopted', 'shared'], description: 'shared: led by another router (Redis scale-out)' })
  readonly kind!: string;
  @ApiProperty({ example: 'ready', enum: ['launching', 'ready', 'unready', 'draining', 'stopping', 'failed'] }) readonly state!: string;
  @ApiProperty({ example: 12, description: 'sessions pinned to it' }) readonly sessions!: number;
  @ApiProperty({ example: 'node-d0', nullable: true, type: String }) readonly slot!: string | null;
  @ApiProperty({ example: [0], nullable: true, type: [Number] }) readonly devices!: number[] | null;
  @ApiProperty({ example: 12345, nullable: true, type: Number }) readonly pid!: number | null;
  @ApiProperty({ example: '/tmp/affinity-router/node-d0.log', nullable: true, type: String }) readonly log_path!: string | null;
  @ApiProperty({ type: HealthView, nullable: true }) readonly last_health!: HealthView | null;
  @ApiProperty({ type: SpeedView, description: 'speed-aware load (contract §4.2); slowness 1 and null seconds with routing.speed_aware off' })
  readonly speed!: SpeedView;
  @ApiProperty({
    example: ['llama-8b', 'sql-lora'],
    nullable: true,
    type: [String],
    description: 'models it serves, LoRA adapters included (declared, or read from its /v1/models); null while not known yet',
  })
  readonly models!: string[] | null;
}

export class ReplicaListView {
  @ApiProperty({ type: [ReplicaView] }) readonly replicas!: ReplicaView[];
  @ApiProperty({ type: CapacityView }) readonly capacity!: CapacityView;
}

export function replicaView(r: Replica): ReplicaView {
  const p = r.placement;
  return {
    name: r.name,
    url: r.url,
    ready: r.routable,
    draining: r.draining,
    owned: r.owned,
    outstanding: r.outstanding,
    routed: r.routed,
    kind: r.kind,
    state: r.state,
    sessions: r.pins,
    slot: p?.slot ?? null,
    devices: p ? [...p.devices] : null,
    pid: p?.pid ?? null,
    log_path: p?.logPath ?? null,
    last_health: r.lastHealth,
    speed: { seconds_per_request: r.requestSeconds === null ? null : Math.round(r.requestSeconds * 1e6) / 1e6, slowness: Math.round(r.slowness * 1e4) / 1e4 },
    models: r.models === undefined ? null : [...r.models],
  };
}

export function capacityView(c: Capacity): CapacityView {
  return { owned: c.owned, ceiling: c.ceiling, free_slots: [...c.free_slots] };
}
