import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/** The executable `name` on PATH (plus the sbin folders, where nginx lives), or null. */
export function findTool(name: string): string | null {
  const dirs = [...(process.env['PATH'] ?? '').split(delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin'];
  for (const d of dirs) {
    if (d === '') continue;
    try {
      accessSync(join(d, name), constants.X_OK);
      return join(d, name);
    } catch {
      // not here
    }
  }
  return null;
}
