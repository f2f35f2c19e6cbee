/**
 * An in-memory LauncherTransport for fleet specs: launches nothing, records every call, and lets
 * the test decide what the "process" does (exit, vanish). Test-only (`*.fake.ts` is not in the
 * prod build).
 */
import type { ExitInfo, LaunchedProcess, LauncherTransport, LaunchSpec, PidIdentity, StopSpec } from '../launcher.transport.js';

export class RecordingTransport implements LauncherTransport {
  readonly launches: LaunchSpec[] = [];
  readonly stops: StopSpec[] = [];
  /** Pids `isAlive` answers false for (an ssh process that is gone). */
  readonly gone = new Set<number>();
  /** What `tailLog` returns. */
  logTail: string[] = ['loading model', 'CUDA out of memory'];
  private nextPid = 4_000;
  private readonly exits = new Map<number, (info: ExitInfo) => void>();

  constructor(readonly kind: 'local' | 'ssh' = 'local') {}

  launch(spec: LaunchSpec): Promise<LaunchedProcess> {
    this.launches.push(spec);
    const pid = this.nextPid++;
    if (this.kind === 'ssh') return Promise.resolve({ pid });
    const exited = new Promise<ExitInfo>((resolve) => this.exits.set(pid, resolve));
    return Promise.resolve({ pid, exited });
  }

  /** The local process `pid` ends on its own. */
  exit(pid: number, info: ExitInfo): void {
    this.exits.get(pid)?.(info);
  }

  stop(spec: StopSpec): Promise<void> {
    this.stops.push(spec);
    if (spec.pid !== null) this.exit(spec.pid, { code: null, signal: 'SIGTERM' });
    return Promise.resolve();
  }

  isAlive(pid: number): Promise<boolean> {
    return Promise.resolve(!this.gone.has(pid));
  }

  identify(): Promise<PidIdentity> {
    return Promise.resolve({ proven: false, reason: 'a recording transport proves nothing' });
  }

  tailLog(): Promise<string[]> {
    return Promise.resolve(this.logTail);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
