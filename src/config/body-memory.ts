import { getHeapStatistics } from 'node:v8';
import type { ConfigProblem } from './config-error.js';
import type { Setting } from './config.sources.js';

/** The default `--body-memory` is this fraction of V8's heap limit (`--max-old-space-size` moves both). */
export const BODY_MEMORY_HEAP_FRACTION = 0.25;

/**
 * The router-wide budget of request-body bytes held at once (`--body-memory`, contract §3): the
 * setting, else a quarter of the heap limit; never below `--max-body` by default, and refused when
 * set below it (a body of the largest accepted size could never be admitted).
 */
export function bodyMemoryBytes(setting: Setting | undefined, maxBodyBytes: number, problems: ConfigProblem[]): number {
  if (setting === undefined) return Math.max(maxBodyBytes, Math.floor(getHeapStatistics().heap_size_limit * BODY_MEMORY_HEAP_FRACTION));
  const n = Number(setting.value);
  if (n < maxBodyBytes) {
    problems.push({
      path: setting.source,
      message: `${n} bytes is less than --max-body (${maxBodyBytes} bytes): a body of the largest accepted size could never be held; raise it or lower --max-body`,
    });
  }
  return n;
}
