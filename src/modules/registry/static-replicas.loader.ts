import { Injectable, type OnModuleInit } from '@nestjs/common';
import { RouterConfig, type StaticReplicaSpec } from '../../config/router-config.js';
import { createEndpoint } from './replica-endpoint.js';
import { Replica } from './replica.js';
import { RegistryService } from './registry.service.js';

/**
 * The registry entry of a static replica: `ready` at start (contract §5), unready when a config
 * reload adds it (routable once its probes pass).
 */
export function staticReplica(s: StaticReplicaSpec, ready: boolean): Replica {
  const endpoint = createEndpoint({ scheme: s.scheme, host: s.host, port: s.port, caFile: s.caFile, tlsVerify: s.tlsVerify });
  return new Replica(s.name, 'static', endpoint, null, { ready, maxInflight: s.maxInflight, models: s.models, engineMetrics: s.engineMetrics });
}

/** Registers the config's static replicas at start; they start ready (contract §5). */
@Injectable()
export class StaticReplicasLoader implements OnModuleInit {
  constructor(
    private readonly config: RouterConfig,
    private readonly registry: RegistryService,
  ) {}

  onModuleInit(): void {
    for (const s of this.config.replicas) this.registry.add(staticReplica(s, true));
  }
}
