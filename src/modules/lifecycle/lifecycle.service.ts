import { Injectable } from '@nestjs/common';

export type Phase = 'starting' | 'running' | 'stopping';

/** Where the process is in its life: readiness and the data plane's shutdown answer read it. */
@Injectable()
export class LifecycleService {
  phase: Phase = 'starting';
  /** Non-fatal degradations shown by /readyz (e.g. the state file cannot be written). */
  readonly degraded = new Map<string, string>();

  get stopping(): boolean {
    return this.phase === 'stopping';
  }
}
