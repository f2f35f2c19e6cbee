/**
 * Deterministic JSON text for the committed OpenAPI document (`openapi.json`): object keys sorted
 * at every depth, arrays kept in order, 2-space indent, one trailing newline. The writer script
 * (`write-openapi.ts`) and the drift test (`test/e2e/openapi.test.ts`) both use this one function,
 * so a difference between them can only come from the document itself.
 */

/** A copy of `value` whose plain objects have their keys inserted in sorted order, at every depth. */
function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  const obj = value as Record<string, unknown>;
  for (const key of Object.keys(obj).sort()) out[key] = sortKeys(obj[key]);
  return out;
}

/**
 * Serialises `doc` with sorted keys, 2-space indent and a trailing newline. The same document always
 * gives the same bytes, whatever order its keys were inserted in. (Integer-like keys such as
 * response codes `"200"` are placed first in numeric order by JSON itself; that is deterministic too.)
 */
export function stableJson(doc: unknown): string {
  return JSON.stringify(sortKeys(doc), null, 2) + '\n';
}
