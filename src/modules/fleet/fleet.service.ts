import { Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { SlotTable, type Capacity } from './slot-table.js';

/** The fleet: device slots and the replicas launched into them. */
@Injectable()
export class FleetService {
  readonly slots: SlotTable;

  constructor(config: RouterConfig) {
    this.slots = new SlotTable(config.slots, config.maxReplicas);
  }

  capacity(): Capacity {
    return this.slots.capacity();
  }
}
