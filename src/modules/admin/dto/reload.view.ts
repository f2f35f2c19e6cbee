import { ApiProperty } from '@nestjs/swagger';
import type { ReloadOutcome } from '../../reload/reload.service.js';

export class ReloadFleetView {
  @ApiProperty({ example: ['b'], type: [String], description: 'static replicas added (routable once healthy)' }) readonly replicas_added!: string[];
  @ApiProperty({ example: ['a'], type: [String], description: 'static replicas draining out (never stopped)' }) readonly replicas_removed!: string[];
  @ApiProperty({ example: ['node-d2'], type: [String] }) readonly slots_added!: string[];
  @ApiProperty({ example: ['node-d3'], type: [String] }) readonly slots_removed!: string[];
  @ApiProperty({ example: ['node-d3'], type: [String], description: 'launched replicas in removed slots, draining then stopping' })
  readonly stopping!: string[];
  @ApiProperty({ example: [], type: [String], description: 'launched replicas in removed slots this router does not stop (a follower, or no proven pid)' })
  readonly left_running!: string[];
}

export class ReloadView {
  @ApiProperty({ example: 'applied', enum: ['applied'] }) readonly result!: 'applied';
  @ApiProperty({ example: '3f2a9c0b1d4e', description: 'first 12 hex digits of the SHA-256 of the config file now in effect' }) readonly hash!: string;
  @ApiProperty({ example: ['routing.affinity_slack', 'replicas'], type: [String], description: 'settings changed now' }) readonly changed!: string[];
  @ApiProperty({ example: ['--port'], type: [String], description: 'settings that differ but keep their value until a restart' })
  readonly restart_required!: string[];
  @ApiProperty({ type: ReloadFleetView }) readonly fleet!: ReloadFleetView;
}

/** The answer of an applied reload. */
export function reloadView(o: Extract<ReloadOutcome, { result: 'applied' }>): ReloadView {
  const f = o.fleet;
  return {
    result: 'applied',
    hash: o.hash,
    changed: [...o.changed],
    restart_required: [...o.restartRequired],
    fleet: {
      replicas_added: [...f.replicasAdded],
      replicas_removed: [...f.replicasRemoved],
      slots_added: [...f.slotsAdded],
      slots_removed: [...f.slotsRemoved],
      stopping: [...f.stopping],
      left_running: [...f.leftRunning],
    },
  };
}
