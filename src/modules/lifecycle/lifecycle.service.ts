import { Injectable } from '@nestjs/common';

export type Phase = 'starting' | 'running' | 'stopping';

/**
 * Where the process is in its life: readiness and the data plane's shutdown answer read it. The
 * one owner of the phase and the degradation list; others change them through the methods below.
 */
@Injectable()
export class LifecycleService {
  private current: Phase = 'starting';
  private readonly degradations = new Map<string, string>();

  get phase(): Phase {
    return this.current;
  }

  get stopping(): boolean {
    return this.current === 'stopping';
  }

  /** Non-fatal degradations shown by /readyz (e.g. the state file cannot be written). */
  get degraded(): ReadonlyMap<string, string> {
    return this.degradations;
  }

  /** The listener is open and start-up (adoption, initial launches) is done. */
  markRunning(): void {
    if (this.current === 'starting') this.current = 'running';
  }

  /** Shutdown began: /readyz turns 503 and new data-plane requests are refused. Never undone. */
  markStopping(): void {
    this.current = 'stopping';
  }

  /** `what` works in a reduced way (`why` says how) until `recovered(what)`. */
  degrade(what: string, why: string): void {
    this.degradations.set(what, why);
  }

  recovered(what: string): void {
    this.degradations.delete(what);
  }
}
