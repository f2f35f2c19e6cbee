import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { Scheme } from '../../config/router-config.js';

/** Where and how to dial a replica: built once when the replica is registered (STYLE §4). */
export interface ReplicaEndpoint {
  readonly scheme: Scheme;
  readonly host: string;
  readonly port: number;
  /** `scheme://host:port` (IPv6 bracketed). */
  readonly url: string;
  /** `Host` header of requests to this replica (the port is left out when it is the scheme's default). */
  readonly hostHeader: string;
  /** Keep-alive agent owned by this replica; destroyed when it is removed. */
  readonly agent: http.Agent;
}

export interface EndpointOptions {
  readonly scheme: Scheme;
  readonly host: string;
  readonly port: number;
  readonly caFile?: string;
  readonly tlsVerify?: boolean;
}

/** Idle upstream sockets are closed before common engine keep-alive timeouts (uvicorn: 5 s). */
const FREE_SOCKET_TIMEOUT_MS = 4_000;
/** Upstream connections per replica (an engine batches far fewer requests than this at once). */
const MAX_SOCKETS_PER_REPLICA = 384;

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
  // maxSockets: a burst of concurrent requests queues in the agent instead of opening more
  // connections than a replica's accept backlog (511 by default) takes at once.
  const base = { keepAlive: true, keepAliveMsecs: 1_000, maxSockets: MAX_SOCKETS_PER_REPLICA, maxFreeSockets: 256, scheduling: 'lifo' as const, timeout: FREE_SOCKET_TIMEOUT_MS };
  const agent =
    o.scheme === 'https'
      ? new https.Agent({
          ...base,
          ca: o.caFile !== undefined ? readFileSync(o.caFile) : undefined,
          rejectUnauthorized: o.tlsVerify !== false,
        })
      : new http.Agent(base);
  return {
    scheme: o.scheme,
    host: o.host,
    port: o.port,
    url: formatUrl(o.scheme, o.host, o.port),
    hostHeader: hostHeader(o.scheme, o.host, o.port),
    agent,
  };
}
