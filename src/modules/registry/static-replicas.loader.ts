import { Injectable, type OnModuleInit } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { createEndpoint } from './replica-endpoint.js';
import { Replica } from './replica.js';
import { RegistryService } from './registry.service.js';

/** Registers the config's static replicas at start; they start ready (contract §5). */
@Injectable()
export class StaticReplicasLoader implements OnModuleInit {
  constructor(
    private readonly config: RouterConfig,
    private readonly registry: RegistryService,
  ) {}

  onModuleInit(): void {
    for (const s of this.config.replicas) {
      const endpoint = createEndpoint({ scheme: s.scheme, host: s.host, port: s.port, caFile: s.caFile, tlsVerify: s.tlsVerify });
      this.registry.add(
        new Replica(s.name, 'static', endpoint, null, { ready: true, maxInflight: s.maxInflight, models: s.models, engineMetrics: s.engineMetrics }),
      );
    }
  }
}
