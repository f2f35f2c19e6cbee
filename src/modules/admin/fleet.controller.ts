import { Get } from '@nestjs/common';
import { ApiOkResponse } from '@nestjs/swagger';
import { AdminController } from './admin-api.decorator.js';
import { FleetService } from '../fleet/fleet.service.js';
import { capacityView } from './dto/replica.view.js';
import { FleetView } from './dto/fleet.view.js';

@AdminController('fleet')
export class FleetController {
  constructor(private readonly fleet: FleetService) {}

  @Get()
  @ApiOkResponse({ type: FleetView, description: 'device slots, capacity, orphans found at adoption, recent launch failures' })
  view(): FleetView {
    const t = this.fleet.slots;
    return {
      slots: t.slots.map((s) => {
        const holder = t.holder(s.name);
        const replica = holder !== undefined && this.fleet.record(s.name) !== undefined ? s.name : null;
        return { name: s.name, host: s.host, devices: [...s.devices], port: s.port, state: holder === undefined ? 'free' : 'reserved', replica };
      }),
      capacity: capacityView(this.fleet.capacity()),
      orphans: this.fleet.orphans.map((o) => ({ ...o, devices: [...o.devices] })),
      failures: this.fleet.failures.map((f) => ({ ...f, devices: [...f.devices] })),
    };
  }
}
