import { Module } from '@nestjs/common';
import { AffinityModule } from '../affinity/affinity.module.js';
import { RegistryModule } from '../registry/registry.module.js';
import { AdmissionService } from './admission.service.js';
import { RoutingService } from './routing.service.js';

@Module({
  imports: [RegistryModule, AffinityModule],
  providers: [RoutingService, AdmissionService],
  exports: [RoutingService, AdmissionService, RegistryModule, AffinityModule],
})
export class RoutingModule {}
