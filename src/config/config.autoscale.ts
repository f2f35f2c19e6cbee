/**
 * The `autoscale` section (contract §6.1) as settings: defaults filled in, seconds turned into
 * milliseconds, and the rules that need the fleet (a host to launch on, `max` within the declared
 * slots, `min` ≤ `max`). The DTO (config.dto.ts) has checked each field's type already.
 */
import type { ConfigProblem } from './config-error.js';
import type { AutoscaleDto } from './config.dto.js';
import type { AutoscaleSettings } from './router-config.js';

/** contract §6.1's example values, used for the fields a section leaves out. */
export const AUTOSCALE_DEFAULTS = { min: 1, target_inflight: 8, interval: 10, up_after: 30, down_after: 300 } as const;

/**
 * `dto` is the file's section (undefined: no autoscaling); `capacity` the declared slot count,
 * undefined when a host was invalid (then the bounds are not checked against it).
 */
export function buildAutoscale(
  dto: AutoscaleDto | undefined,
  fileProblems: readonly ConfigProblem[],
  hostCount: number,
  capacity: number | undefined,
  problems: ConfigProblem[],
): AutoscaleSettings | undefined {
  if (dto === undefined || dto === null) return undefined;
  if (fileProblems.some((p) => p.path === 'autoscale' || p.path.startsWith('autoscale.'))) return undefined;
  if (hostCount === 0 && capacity !== undefined) {
    problems.push({ path: 'autoscale', message: 'needs at least one entry in "hosts" to launch replicas on (the config declares none)' });
    return undefined;
  }
  const min = dto.min ?? AUTOSCALE_DEFAULTS.min;
  const max = dto.max ?? capacity ?? min;
  if (capacity !== undefined && dto.max != null && dto.max > capacity) {
    problems.push({ path: 'autoscale.max', message: `${dto.max} exceeds the ${capacity} declared device slots` });
  }
  if (min > max) {
    problems.push({
      path: 'autoscale.min',
      message: dto.max != null ? `${min} exceeds autoscale.max ${max}` : `${min} exceeds the ${max} declared device slots (the default of autoscale.max)`,
    });
  }
  return {
    min,
    max,
    targetInflight: dto.target_inflight ?? AUTOSCALE_DEFAULTS.target_inflight,
    intervalMs: (dto.interval ?? AUTOSCALE_DEFAULTS.interval) * 1000,
    upAfterMs: (dto.up_after ?? AUTOSCALE_DEFAULTS.up_after) * 1000,
    downAfterMs: (dto.down_after ?? AUTOSCALE_DEFAULTS.down_after) * 1000,
  };
}
