import { Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { StateService } from '../state/state.service.js';
import type { StateReplica } from '../state/state-file.js';
import type { FailureReport, OrphanReport } from './fleet-reports.js';
import type { LaunchRecord } from './launch-record.js';
import { SlotTable } from './slot-table.js';

/** Reports kept for GET /fleet. */
const MAX_REPORTS = 50;

/**
 * The fleet's books, shared by its units (launch, drain, stop, adoption): the slot table, one
 * record per launched or adopted replica, the failure and orphan reports, lifetime counts. Only
 * the fleet module writes them; everyone else reads through FleetService.
 */
@Injectable()
export class FleetBook {
  readonly slots: SlotTable;
  readonly records = new Map<string, LaunchRecord>();
  private readonly orphanList: OrphanReport[] = [];
  private readonly failureList: FailureReport[] = [];
  /** Lifetime counts for /metrics. */
  readonly stats = { launches: 0, stops: 0, adoptions: 0, launchFailures: 0, launchTimeouts: 0, exits: 0 };
  private seq = 0;

  constructor(
    config: RouterConfig,
    private readonly state: StateService,
  ) {
    this.slots = new SlotTable(config.slots, config.maxReplicas);
  }

  get orphans(): readonly OrphanReport[] {
    return this.orphanList;
  }

  get failures(): readonly FailureReport[] {
    return this.failureList;
  }

  /** A unique holder name for a slot reservation (`launch#3`, `adopt#4`). */
  holder(kind: 'launch' | 'adopt'): string {
    return `${kind}#${++this.seq}`;
  }

  reportOrphan(o: OrphanReport): void {
    this.orphanList.push(o);
  }

  /** Newest first, the last 50. */
  reportFailure(f: FailureReport): void {
    this.failureList.unshift(f);
    this.failureList.length = Math.min(this.failureList.length, MAX_REPORTS);
  }

  /** Write the fleet part of the state file: every record not stopped, and those a stop left running. */
  persist(): void {
    if (!this.state.enabled) return;
    const replicas: StateReplica[] = [...this.records.values()]
      .filter((rec) => !rec.stopRequested || rec.leftRunning !== undefined)
      .map((rec) => ({
        slot: rec.slot.name,
        host: rec.host.name,
        devices: rec.slot.devices,
        address: rec.replica.endpoint.host,
        port: rec.replica.endpoint.port,
        scheme: rec.replica.endpoint.scheme,
        pid: rec.replica.placement?.pid ?? null,
        launched_at: rec.replica.placement?.launchedAt ?? null,
        model: rec.replica.placement?.model ?? null,
      }));
    this.state.saveFleet(replicas);
  }
}
