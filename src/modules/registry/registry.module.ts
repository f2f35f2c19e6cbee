import { Module } from '@nestjs/common';
import { RegistryService } from './registry.service.js';
import { StaticReplicasLoader } from './static-replicas.loader.js';

@Module({
  providers: [RegistryService, StaticReplicasLoader],
  exports: [RegistryService],
})
export class RegistryModule {}
