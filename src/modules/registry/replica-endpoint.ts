import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
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
  /** The data plane's keep-alive connections (client traffic only); closed when the replica is removed. */
  readonly pool: UpstreamPool;
  /** Keep-alive agent of warm hand-off copies (routing.warm_handoff); destroyed with the endpoint. */
  readonly agent: http.Agent;
  /**
   * Agent of health probes, model discovery and metric scrapes (contract §3): connections of their
   * own, opened per probe, so hundreds of streams in the data plane's pool never delay a probe.
   */
  readonly probeAgent: http.Agent;
  /** Closes the data plane's idle sockets before the engine does (see FREE_SOCKET_IDLE_MS). */
  readonly idleSweep: NodeJS.Timeout;
}

export interface EndpointOptions {
  readonly scheme: Scheme;
  readonly host: string;
  readonly port: number;
  readonly caFile?: string;
  readonly tlsVerify?: boolean;
}

/**
 * Idle upstream sockets are closed before common engine keep-alive timeouts (uvicorn: 5 s): a
 * sweep every half second closes those idle this long, so none lives past 4 s. A sweep instead of
 * the agent's `timeout` option, which re-arms a socket timer on every request (measured: ~3% of
 * the data path's CPU, bench/RESULTS.md).
 */
const FREE_SOCKET_IDLE_MS = 3_500;
const FREE_SOCKET_SWEEP_MS = 500;
/** Idle upstream connections kept per replica for reuse; busy ones are never capped (contract §3). */
const MAX_FREE_SOCKETS_PER_REPLICA = 256;

/** When a pooled socket was last handed back to the agent (performance.now()). */
const FREED_AT = Symbol('freedAt');
type Freed = Socket & { [FREED_AT]?: number };

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
  // No maxSockets: every request is forwarded at once (contract §3, "no hidden concurrency cap");
  // an engine queues what it cannot batch, and `max_inflight` is the operator's cap when wanted.
  const dataPlane = {
    keepAlive: true,
    keepAliveMsecs: 1_000,
    maxFreeSockets: MAX_FREE_SOCKETS_PER_REPLICA,
    scheduling: 'lifo' as const,
  };
  // Probes dial a fresh connection each time (one every few seconds): a kept-alive probe socket
  // would race the engine's idle timeout and turn a healthy replica's reset into a failed probe.
  const probes = { keepAlive: false };
  const ca = o.caFile !== undefined ? readFileSync(o.caFile) : undefined;
  const tls = { ca, rejectUnauthorized: o.tlsVerify !== false };
  const agent = o.scheme === 'https' ? new https.Agent({ ...dataPlane, ...tls }) : new http.Agent(dataPlane);
  const probeAgent = o.scheme === 'https' ? new https.Agent({ ...probes, ...tls }) : new http.Agent(probes);
  // After the agent's own 'free' listener, which pooled the socket (or destroyed it). The time is
  // a property of the socket (a WeakMap entry per request cost more than the sweep it serves).
  agent.on('free', (socket: Freed) => (socket[FREED_AT] = performance.now()));
  const idleSweep = setInterval(() => closeIdleSockets(agent), FREE_SOCKET_SWEEP_MS);
  idleSweep.unref();
  const url = formatUrl(o.scheme, o.host, o.port);
  return {
    scheme: o.scheme,
    host: o.host,
    port: o.port,
    url,
    hostHeader: hostHeader(o.scheme, o.host, o.port),
    pool: new UpstreamPool(url, o.scheme === 'https' ? tls : undefined),
    agent,
    probeAgent,
    idleSweep,
  };
}

/** Destroys the pooled sockets idle for FREE_SOCKET_IDLE_MS or longer (the agent drops them on close). */
function closeIdleSockets(agent: http.Agent): void {
  const now = performance.now();
  for (const list of Object.values(agent.freeSockets)) {
    for (const socket of [...(list ?? [])] as Freed[]) if (now - (socket[FREED_AT] ?? now) >= FREE_SOCKET_IDLE_MS) socket.destroy();
  }
}

/**
 * A request to the replica, on `http` or `https` by its scheme. `opts.agent` says which pool: the
 * data plane's `agent` for client traffic (and warm copies), `probeAgent` for everything else.
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
  clearInterval(ep.idleSweep);
  ep.pool.destroy();
  ep.agent.destroy();
  ep.probeAgent.destroy();
}
