import type { HostSpec, SlotSpec } from '../../config/router-config.js';
import type { LauncherTransport } from '../launcher/launcher.transport.js';
import type { Replica } from '../registry/replica.js';

export type DrainState = 'draining' | 'stopping' | 'stopped';

/** The fleet's own bookkeeping for one launched or adopted replica. */
export class LaunchRecord {
  /** performance.now() at launch, for the launch timeout. */
  readonly startedAt = performance.now();
  /** The transport's launch while it runs (a drain waits for it: the pid to stop is known only then). */
  spawning: Promise<unknown> | undefined;
  drain: Promise<void> | undefined;
  drainDeadline: string | undefined;
  stopped: Promise<void> | undefined;
  /** Why it ended when it did not end by an operator's request. */
  failure: string | undefined;
  /** The fleet itself asked it to stop (so its exit is expected). */
  stopRequested = false;
  /**
   * Why a stop left it running (no proven way to stop it, or it still answers after the stop):
   * it keeps its slot and stays in the state file. Undefined otherwise.
   */
  leftRunning: string | undefined;

  constructor(
    readonly replica: Replica,
    readonly host: HostSpec,
    readonly slot: SlotSpec,
    readonly transport: LauncherTransport,
    readonly stopArgv: readonly string[] | undefined,
    readonly env: Readonly<Record<string, string>>,
    /** Unique per launch: the slot table frees a slot only for the holder that took it. */
    readonly holder: string,
  ) {}

  get name(): string {
    return this.replica.name;
  }
}
