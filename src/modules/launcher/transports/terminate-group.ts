/**
 * How both transports stop a replica that has no `stop_command`: SIGTERM its process group, ask
 * until the group is gone or `killAfterMs` passed, then SIGKILL it and wait (bounded) for it to
 * vanish. Polling, because an adopted pid or a remote one sends the router no exit event.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** One process group, reached by local syscalls or by remote shell lines. */
export interface ProcessGroupHandle {
  /** Send `signal` to the group (or, failing that, the pid); false when it is already gone. */
  signal(signal: 'TERM' | 'KILL'): Promise<boolean>;
  /** True while the group (or the pid) still exists. */
  isAlive(): Promise<boolean>;
}

export interface TerminateTiming {
  /** SIGKILL the group this long after SIGTERM. */
  readonly killAfterMs: number;
  /** How often to ask whether the group is gone. */
  readonly pollIntervalMs: number;
  /** How long to wait for the group to vanish after SIGKILL. */
  readonly afterKillWaitMs: number;
}

/** Resolves when the group is gone, or SIGKILL was sent and `afterKillWaitMs` passed. */
export async function terminateGroup(group: ProcessGroupHandle, timing: TerminateTiming): Promise<void> {
  if (!(await group.signal('TERM'))) return;
  const termDeadline = Date.now() + timing.killAfterMs;
  while (Date.now() < termDeadline) {
    if (!(await group.isAlive())) return;
    await sleep(Math.min(timing.pollIntervalMs, Math.max(1, termDeadline - Date.now())));
  }
  if (!(await group.signal('KILL'))) return;
  const killDeadline = Date.now() + timing.afterKillWaitMs;
  while (Date.now() < killDeadline && (await group.isAlive())) await sleep(timing.pollIntervalMs);
}
