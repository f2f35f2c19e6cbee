import type http from 'node:http';
import type { RouterConfig } from '../../config/router-config.js';

/** Idle keep-alive of client connections: above the usual ingress idle timeout (60 s). */
const KEEP_ALIVE_TIMEOUT_MS = 75_000;

/**
 * Pending connections the kernel holds for the listener (capped by net.core.somaxconn, 4096 on
 * current kernels). Node accepts about one connection per event-loop turn, so under thousands of
 * streams Node's default of 511 filled and new clients' SYNs were dropped (bench w).
 */
export const LISTEN_BACKLOG = 4_096;

/**
 * The options of every HTTP server that takes client connections (the primary's, and each worker
 * process's). Slow clients (slowloris) are cut: headers within --header-timeout, the whole request
 * within --body-timeout; Node enforces both per connection without blocking others.
 */
export function clientServerOptions(config: RouterConfig): http.ServerOptions {
  return {
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    requestTimeout: config.bodyTimeoutMs,
    headersTimeout: Math.min(config.headerTimeoutMs, config.bodyTimeoutMs),
    connectionsCheckingInterval: 1_000,
    requireHostHeader: false, // checked by refuseWithoutHost, answered in the router's error shapes
  };
}
