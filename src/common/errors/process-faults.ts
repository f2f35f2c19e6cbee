import type { AppLogger } from '../logging/logger.js';
import type { InternalErrors } from './internal-errors.js';

/** What the process-level handlers need; main.ts passes the real ones, the spec fakes. */
export interface ProcessFaultDeps {
  readonly errors: InternalErrors;
  /** The app's logger once it is up; before that, lines go to `stderr` as JSON. */
  readonly log: () => AppLogger | undefined;
  readonly stderr: (line: string) => void;
  readonly exit: (code: number) => void;
}

/**
 * Errors that escaped every handler in the router's code (docs/operations.md, "Unexpected
 * errors"). Both are router bugs; they differ in what they leave behind:
 *
 * - An unhandled rejection is an async operation that failed with nobody waiting for it. Its code
 *   had already returned to the event loop, so no synchronous update was cut off half-way by it,
 *   and lint forbids floating promises in this code base, so what remains is rare. Ending the
 *   process for one would cut every stream in flight on every replica and, without a state file
 *   or Redis, every session pin. So: one structured error line with a running count, the metric
 *   `affinity_router_internal_errors_total{source="unhandled_rejection"}`, and the router keeps
 *   serving. (Node 20 would otherwise exit on the first one.)
 * - An uncaught exception is a synchronous throw out of an event handler or timer: whatever that
 *   code was updating (a replica's in-flight count, the slot table, the session directory) may be
 *   half-done, and Node documents that resuming after it is unsafe. So: one fatal line, then exit
 *   1 at once, for the supervisor (systemd, Kubernetes) to restart the router. Launched replicas
 *   keep running; a restart with the same --state-file adopts them.
 */
export function onUnhandledRejection(deps: ProcessFaultDeps, reason: unknown): void {
  const count = deps.errors.record('unhandled_rejection');
  const msg = 'unhandled promise rejection (a router bug); still serving';
  const log = deps.log();
  if (log !== undefined) log.error({ event: 'internal_error', source: 'unhandled_rejection', count, err: reason }, msg);
  else deps.stderr(JSON.stringify({ level: 50, event: 'internal_error', source: 'unhandled_rejection', count, err: describe(reason), msg }));
}

export function onUncaughtException(deps: ProcessFaultDeps, err: unknown): void {
  const msg = 'uncaught exception (a router bug): exiting 1 for a restart, state may be inconsistent';
  try {
    const log = deps.log();
    if (log !== undefined) log.fatal({ event: 'uncaught_exception', err }, msg);
    else deps.stderr(JSON.stringify({ level: 60, event: 'uncaught_exception', err: describe(err), msg }));
  } finally {
    deps.exit(1);
  }
}

/** Installs both handlers on `process`. */
export function installProcessFaultHandlers(deps: ProcessFaultDeps): void {
  process.on('unhandledRejection', (reason) => onUnhandledRejection(deps, reason));
  process.on('uncaughtException', (err) => onUncaughtException(deps, err));
}

function describe(e: unknown): { type: string; message: string; stack?: string } {
  if (e instanceof Error) return { type: e.name, message: e.message, ...(e.stack !== undefined ? { stack: e.stack } : {}) };
  return { type: typeof e, message: String(e) };
}
