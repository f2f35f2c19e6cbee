import type { EngineMetricsSpec } from '../../config/router-config.js';
import { createEndpoint } from '../registry/replica-endpoint.js';
import { Replica } from '../registry/replica.js';
import type { StateReplica } from '../state/state-file.js';

/**
 * A replica that already runs, as recorded in the state file (adopted by this router) or by the
 * leader in Redis (`shared`, mirrored by a follower): an existing server, so `unready` until its
 * checks pass, never `launching`.
 */
export function recordedReplica(
  entry: StateReplica,
  kind: 'adopted' | 'shared',
  where: { readonly host: string; readonly devices: readonly number[]; readonly pid: number | null; readonly logPath: string },
  init: { readonly ready: boolean; readonly maxInflight: number | undefined; readonly engineMetrics?: EngineMetricsSpec | undefined },
): Replica {
  return new Replica(
    entry.slot,
    kind,
    createEndpoint({ scheme: entry.scheme, host: entry.address, port: entry.port }),
    {
      slot: entry.slot,
      ...where,
      launchedAt: entry.launched_at ?? new Date().toISOString(),
      ...(entry.model !== null ? { model: entry.model } : {}),
    },
    { ...init, everReady: true },
  );
}
