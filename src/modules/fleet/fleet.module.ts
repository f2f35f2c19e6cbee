import { Module } from '@nestjs/common';
import { RoutingModule } from '../routing/routing.module.js';
import { FleetService } from './fleet.service.js';

@Module({
  imports: [RoutingModule],
  providers: [FleetService],
  exports: [FleetService],
})
export class FleetModule {}
