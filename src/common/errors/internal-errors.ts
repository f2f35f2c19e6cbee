/**
 * Where an error that no code path expected was caught:
 * - `data_plane`: a throw inside the handling of a `/v1/` request (answered 500, router keeps serving);
 * - `unhandled_rejection`: a rejected promise nobody handled, caught by the process handler in main.ts.
 */
export type InternalErrorSource = 'data_plane' | 'unhandled_rejection';

export const INTERNAL_ERROR_SOURCES: readonly InternalErrorSource[] = ['data_plane', 'unhandled_rejection'];

/**
 * The count of router bugs seen since start, by where they were caught; metrics reads it as
 * `affinity_router_internal_errors_total{source}` (docs/operations.md, "Unexpected errors"). One
 * instance per process: main.ts creates it before anything runs, so a rejection during start-up
 * counts too, and hands it to the app (AppOptions.internalErrors).
 */
export class InternalErrors {
  private readonly counts: Record<InternalErrorSource, number> = { data_plane: 0, unhandled_rejection: 0 };

  /** Count one more; returns the new total for `source` (logged with the error). */
  record(source: InternalErrorSource): number {
    return ++this.counts[source];
  }

  count(source: InternalErrorSource): number {
    return this.counts[source];
  }
}
