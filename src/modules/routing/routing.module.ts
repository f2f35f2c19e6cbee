import { Module } from '@nestjs/common';
import { AffinityModule } from '../affinity/affinity.module.js';
import { RegistryModule } from '../registry/registry.module.js';
import { RoutingService } from './routing.service.js';

@Module({
  imports: [RegistryModule, AffinityModule],
  providers: [RoutingService],
  exports: [RoutingService, RegistryModule, AffinityModule],
})
export class RoutingModule {}
