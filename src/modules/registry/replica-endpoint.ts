import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { Scheme } from '../../config/router-config.js';
import { UpstreamPool } from './upstream-pool.js';

/** Where and how to dial a replica: built once when the replica is registered (STYLE §4). */
export interface ReplicaEndpoint {
  readonly scheme: Scheme;
  readonly host: string;
  readonly port: number;
  /** `scheme://host:port` (IPv6 bracketed). */
  readonly url: string;
  /** `Host` header of requests to this replica (the port is left out when it is the scheme's default). */
  readonly hostHeader: string;
  /**
   * The data plane's keep-alive connections: client traffic and warm hand-off copies
   * (routing.warm_handoff); closed when the replica is removed.
   */
  readonly pool: UpstreamPool;
  /**
   * Agent of health probes, model discovery and metric scrapes (contract §3): connections of their
   * own, opened per probe, so hundreds of streams in the data plane's pool never delay a probe.
   */
  readonly probeAgent: http.Agent;
}

export interface EndpointOptions {
  readonly scheme: Scheme;
  readonly host: string;
  readonly port: number;
  readonly caFile?: string;
  readonly tlsVerify?: boolean;
}

/** An IPv6 literal in brackets, as URLs and `Host` headers write it. */
function bracketed(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

export function formatUrl(scheme: Scheme, host: string, port: number): string {
  return `${scheme}://${bracketed(host)}:${port}`;
}

function hostHeader(scheme: Scheme, host: string, port: number): string {
  return port === (scheme === 'https' ? 443 : 80) ? bracketed(host) : `${bracketed(host)}:${port}`;
}

export function createEndpoint(o: EndpointOptions): ReplicaEndpoint {
  // Probes dial a fresh connection each time (one every few seconds): a kept-alive probe socket
  // would race the engine's idle timeout and turn a healthy replica's reset into a failed probe.
  const probes = { keepAlive: false };
  const ca = o.caFile !== undefined ? readFileSync(o.caFile) : undefined;
  const tls = { ca, rejectUnauthorized: o.tlsVerify !== false };
  const probeAgent = o.scheme === 'https' ? new https.Agent({ ...probes, ...tls }) : new http.Agent(probes);
  const url = formatUrl(o.scheme, o.host, o.port);
  return {
    scheme: o.scheme,
    host: o.host,
    port: o.port,
    url,
    hostHeader: hostHeader(o.scheme, o.host, o.port),
    pool: new UpstreamPool(url, o.scheme === 'https' ? tls : undefined),
    probeAgent,
  };
}

/**
 * A request to the replica, on `http` or `https` by its scheme. `opts.agent` is the endpoint's
 * `probeAgent` (the data plane's traffic goes through `pool`).
 * `opts` is the caller's fresh object: its `host` and `port` are set here (no copy per request).
 */
export function requestTo(
  ep: ReplicaEndpoint,
  opts: Omit<http.RequestOptions, 'host' | 'port'>,
  onResponse?: (res: http.IncomingMessage) => void,
): http.ClientRequest {
  const o: http.RequestOptions = opts;
  o.host = ep.host;
  o.port = ep.port;
  return (ep.scheme === 'https' ? https : http).request(o, onResponse);
}

/** Close every connection of an endpoint (the replica left the table). */
export function destroyEndpoint(ep: ReplicaEndpoint): void {
  ep.pool.destroy();
  ep.probeAgent.destroy();
}
