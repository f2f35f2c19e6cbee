import http from 'node:http';
import https from 'node:https';
import type { RegistryService } from '../registry/registry.service.js';
import { endpointKey } from '../registry/replica-endpoint.js';

interface AgentInternals {
  addRequest(req: http.ClientRequest, options: http.RequestOptions): void;
}

/**
 * http-proxy takes one `agent` for the whole proxy; these hand each request to the keep-alive agent
 * of the replica it is addressed to, so every replica owns its pool (and its TLS settings) and the
 * pool goes away with the replica.
 */
function dispatching<A extends http.Agent>(Base: new (o: http.AgentOptions) => A, registry: RegistryService): A {
  const agent = new Base({ keepAlive: true });
  const fallback = agent as unknown as AgentInternals;
  const own = fallback.addRequest.bind(agent);
  fallback.addRequest = (req, options) => {
    const r = registry.byEndpoint(endpointKey(options.host ?? '', options.port ?? ''));
    if (r === undefined) return own(req, options);
    (r.endpoint.agent as unknown as AgentInternals).addRequest(req, options);
  };
  return agent;
}

export function createDispatchingAgents(registry: RegistryService): { http: http.Agent; https: https.Agent } {
  return { http: dispatching(http.Agent, registry), https: dispatching(https.Agent, registry) };
}
