import { ApiProperty } from '@nestjs/swagger';
import type { HostSpec } from '../../../config/router-config.js';
import type { Replica } from '../../registry/replica.js';
import type { Capacity, SlotTable } from '../../fleet/slot-table.js';

/** One model's share of the fleet (`GET /fleet` `models`, contract §4.3). */
export class ModelCapacityView {
  @ApiProperty({ example: 'llama-8b' }) readonly model!: string;
  @ApiProperty({ example: ['node'], type: [String], description: 'hosts whose launched replicas serve it (served_model_name, else model)' })
  readonly hosts!: string[];
  @ApiProperty({ example: 4, description: 'device slots declared on those hosts' }) readonly slots!: number;
  @ApiProperty({ example: ['node-d2'], type: [String], description: 'slots a launch of this model may take now' }) readonly free_slots!: string[];
  @ApiProperty({ example: 2, description: 'replicas in the table that list it (any kind, any state)' }) readonly replicas!: number;
  @ApiProperty({ example: 1, description: 'of those, routable now' }) readonly routable!: number;
}

/**
 * Capacity per model: every model a host is declared for or a replica lists, in first-seen order
 * (hosts first). A replica whose list is not known yet counts for no model.
 */
export function modelCapacity(hosts: readonly HostSpec[], table: SlotTable, capacity: Capacity, replicas: readonly Replica[]): ModelCapacityView[] {
  const byModel = new Map<string, { hosts: string[]; slots: number; free: string[]; replicas: number; routable: number }>();
  const entry = (m: string): { hosts: string[]; slots: number; free: string[]; replicas: number; routable: number } => {
    let e = byModel.get(m);
    if (e === undefined) byModel.set(m, (e = { hosts: [], slots: 0, free: [], replicas: 0, routable: 0 }));
    return e;
  };
  const free = new Set(capacity.free_slots);
  for (const h of hosts) {
    const m = h.servedModelName ?? h.model;
    if (m === undefined) continue;
    const e = entry(m);
    e.hosts.push(h.name);
    for (const s of table.slots) {
      if (s.host !== h.name) continue;
      e.slots++;
      if (free.has(s.name)) e.free.push(s.name);
    }
  }
  for (const r of replicas) {
    for (const m of r.models ?? []) {
      const e = entry(m);
      e.replicas++;
      if (r.routable) e.routable++;
    }
  }
  return [...byModel].map(([model, e]) => ({ model, hosts: e.hosts, slots: e.slots, free_slots: e.free, replicas: e.replicas, routable: e.routable }));
}
