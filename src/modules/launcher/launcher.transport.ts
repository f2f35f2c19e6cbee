import type { HostSpec, SlotSpec } from '../../config/router-config.js';

/** Everything a transport needs to start one replica process. Argv and env are already expanded. */
export interface LaunchSpec {
  readonly slot: SlotSpec;
  readonly host: HostSpec;
  /** Expanded argv; argv[0] is the program. */
  readonly argv: readonly string[];
  /**
   * COMPLETE environment for local launches (already minus ROUTER_*);
   * for ssh only the host's own `env` entries are sent.
   */
  readonly env: Readonly<Record<string, string>>;
  /** `<log_dir>/<slot>.log` on the machine that runs the process. */
  readonly logPath: string;
  readonly workdir?: string;
}

/** How a locally launched process ended: exit code, or the name of the signal that killed it. */
export interface ExitInfo {
  readonly code: number | null;
  readonly signal: string | null;
}

/** A started replica process. */
export interface LaunchedProcess {
  /**
   * local: child pid (= its process group id);
   * ssh: remote pid echoed back (a session/group leader).
   */
  readonly pid: number;
  /** local only: settles the moment the child exits. */
  readonly exited?: Promise<ExitInfo>;
}

/** How to stop a replica: the host's stop command, or signals to the recorded process group. */
export interface StopSpec {
  readonly pid: number | null;
  /** Host `stop_command`, expanded; run INSTEAD of signals. */
  readonly stopArgv?: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly workdir?: string;
  /** SIGKILL the group this long after SIGTERM (10_000). */
  readonly killAfterMs: number;
}

/** Whether a recorded pid is provably the replica serving a port, and if not, why not. */
export type PidIdentity = { readonly proven: true } | { readonly proven: false; readonly reason: string };

/** Starts, stops and probes replica processes on one host (local machine or over ssh). */
export interface LauncherTransport {
  readonly kind: 'local' | 'ssh';
  /** Resolves once the process started; never waits for the model to load. */
  launch(spec: LaunchSpec): Promise<LaunchedProcess>;
  /**
   * Resolves when the stop command finished, or the group is gone (or SIGKILL was sent).
   * Rejects with LaunchError('stop_failed' | connection codes).
   */
  stop(spec: StopSpec): Promise<void>;
  /** True while the process group (or, failing that, the pid) still exists. */
  isAlive(pid: number): Promise<boolean>;
  /**
   * The proof asked before a recorded pid may ever be signalled (adoption, contract §6): the pid is
   * alive and it, or a member of the process group it leads, holds the socket listening on
   * `port` (Linux /proc, on the machine that runs it). Never rejects: anything that prevents the
   * proof (a dead pid, another listener, no /proc, a lost connection) is `proven: false` with the
   * reason.
   */
  identify(pid: number, port: number): Promise<PidIdentity>;
  /** The last `lines` lines of a log file on the machine that runs the process ([] when absent). */
  tailLog(logPath: string, lines: number): Promise<string[]>;
  /** Release connections (ssh). */
  close(): Promise<void>;
}

/** Why a launcher operation failed. */
export type LaunchErrorCode = 'spawn_failed' | 'ssh_connect_failed' | 'host_key_rejected' | 'remote_command_failed' | 'log_unwritable' | 'stop_failed';

/** A launcher failure with a machine-readable code; the message never contains key material. */
export class LaunchError extends Error {
  constructor(
    readonly code: LaunchErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'LaunchError';
  }
}
