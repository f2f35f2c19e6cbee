import { accessSync, constants, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { parseBenchArgs } from './bench-options.js';
import type { BenchContext } from './scenario.js';

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

/**
 * The context a stand-alone bench script (ab-builds, ab-first-byte, cpu-budget) hands the bench's
 * process helpers: the default options, wrk when the script drives load with it, a temp dir of its
 * own (the script removes it), log lines tagged with `tag` on stderr.
 */
export function scriptContext(tag: string, withWrk: boolean): BenchContext {
  return {
    options: parseBenchArgs([]),
    tools: { wrk: withWrk ? findTool('wrk') : null, nginx: null, haproxy: null },
    tmpDir: mkdtempSync(join(tmpdir(), `ar-${tag}-`)),
    log: (m) => process.stderr.write(`[${tag} ${new Date().toISOString().slice(11, 19)}] ${m}\n`),
  };
}
