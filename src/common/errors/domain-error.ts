/**
 * Errors modules throw with a stable code; one table (below) maps codes to HTTP statuses and one
 * filter turns them into application/problem+json (STYLE §6).
 */
export const DOMAIN_ERROR_STATUS = {
  unknown_replica: 404,
  unknown_host: 404,
  unknown_model: 404,
  unknown_session: 404,
  not_launched: 409,
  not_stoppable: 409,
  pool_exhausted: 409,
  no_free_slot: 409,
  replica_not_routable: 409,
  launch_failed: 502,
  stop_incomplete: 502,
  not_leader: 409,
  autoscale_off: 409,
  body_too_deep: 400,
  invalid_config: 422,
} as const;

export type DomainErrorCode = keyof typeof DOMAIN_ERROR_STATUS;

export class DomainError extends Error {
  constructor(
    readonly code: DomainErrorCode,
    message: string,
    /** Extra members for the problem body (e.g. `capacity`). */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }

  get status(): number {
    return DOMAIN_ERROR_STATUS[this.code];
  }
}
