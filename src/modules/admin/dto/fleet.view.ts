import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { AutoscalerView } from './autoscaler.view.js';
import { CapacityView } from './replica.view.js';
import { ModelCapacityView } from './model-capacity.view.js';

export class LaunchedView {
  @ApiProperty({ example: 'node-d0' }) readonly name!: string;
  @ApiProperty({ example: 'http://127.0.0.1:8001' }) readonly url!: string;
  @ApiProperty({ example: false }) readonly ready!: boolean;
  @ApiProperty({ example: 'launched; it becomes routable once its model is loaded' }) readonly message!: string;
}

export class StoppedView {
  @ApiProperty({ example: 'node-d0' }) readonly name!: string;
  @ApiProperty({ example: true }) readonly stopped!: boolean;
  @ApiProperty({ type: CapacityView }) readonly capacity!: CapacityView;
}

export class DrainStateView {
  @ApiProperty({ example: 'node-d0' }) readonly name!: string;
  @ApiProperty({ example: 'draining', enum: ['draining', 'stopping', 'stopped'] }) readonly state!: string;
  @ApiProperty({ example: 3 }) readonly outstanding!: number;
  @ApiProperty({ example: '2026-12-02T16:05:00.000Z', nullable: true, type: String }) readonly drain_deadline!: string | null;
}

export class SlotView {
  @ApiProperty({ example: 'node-d0' }) readonly name!: string;
  @ApiProperty({ example: 'node' }) readonly host!: string;
  @ApiProperty({ example: [0, 1], type: [Number] }) readonly devices!: number[];
  @ApiProperty({ example: 8001 }) readonly port!: number;
  @ApiProperty({ example: 'reserved', enum: ['free', 'reserved'] }) readonly state!: string;
  @ApiProperty({ example: 'node-d0', nullable: true, type: String }) readonly replica!: string | null;
}

export class OrphanView {
  @ApiProperty({ example: 'node-d2' }) readonly slot!: string;
  @ApiProperty({ example: 'node' }) readonly host!: string;
  @ApiProperty({ example: [2], type: [Number] }) readonly devices!: number[];
  @ApiProperty({ example: '127.0.0.1' }) readonly address!: string;
  @ApiProperty({ example: 8003 }) readonly port!: number;
  @ApiPropertyOptional({ example: 4242, nullable: true, type: Number }) readonly pid?: number | null;
  @ApiProperty({ example: 'does not answer at http://127.0.0.1:8003' }) readonly reason!: string;
}

export class FailureView {
  @ApiProperty({ example: 'node-d1' }) readonly name!: string;
  @ApiProperty({ example: 'node-d1' }) readonly slot!: string;
  @ApiProperty({ example: 'node' }) readonly host!: string;
  @ApiProperty({ example: [1], type: [Number] }) readonly devices!: number[];
  @ApiProperty({ example: 'not ready within --launch-timeout 600 s' }) readonly reason!: string;
  @ApiProperty({ example: '/tmp/affinity-router/node-d1.log' }) readonly log_path!: string;
  @ApiProperty({ example: ['Loading model...'], type: [String] }) readonly log_tail!: string[];
  @ApiProperty({ example: '2026-12-02T16:05:00.000Z' }) readonly at!: string;
}

export class FleetView {
  @ApiProperty({ type: [SlotView] }) readonly slots!: SlotView[];
  @ApiProperty({ type: CapacityView }) readonly capacity!: CapacityView;
  @ApiProperty({ type: [OrphanView] }) readonly orphans!: OrphanView[];
  @ApiProperty({ type: [FailureView], description: 'recent launches that failed or timed out, newest first' }) readonly failures!: FailureView[];
  @ApiProperty({ type: AutoscalerView, description: "the autoscaler (contract §6.1): paused or not, each model pool's current and desired size" })
  readonly autoscaler!: AutoscalerView;
  @ApiProperty({ type: [ModelCapacityView], description: 'capacity per model (contract §4.3)' }) readonly models!: ModelCapacityView[];
}
