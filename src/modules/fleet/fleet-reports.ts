/** What GET /fleet reports about failed launches, orphans and drains (views build on these). */
export interface FailureReport {
  readonly name: string;
  readonly slot: string;
  readonly host: string;
  readonly devices: readonly number[];
  readonly reason: string;
  readonly log_path: string;
  readonly log_tail: string[];
  readonly at: string;
}

export interface OrphanReport {
  readonly slot: string;
  readonly host: string;
  readonly devices: readonly number[];
  readonly address: string;
  readonly port: number;
  readonly pid: number | null;
  readonly reason: string;
}

export interface DrainStatus {
  readonly name: string;
  readonly state: string;
  readonly outstanding: number;
  readonly drain_deadline: string | null;
}
