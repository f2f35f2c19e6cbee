/**
 * Temporary directories for tests and fakes. Each process gets one root under the system temp
 * dir, removed when the process exits, so a test run leaves nothing behind in /tmp however its
 * tests end (a failing assertion skips a test's own clean-up).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let root: string | undefined;

/** A new empty directory named `<prefix>XXXXXX` under this process's root. */
export function tempDir(prefix: string): string {
  root ??= makeRoot();
  return mkdtempSync(join(root, prefix));
}

function makeRoot(): string {
  const dir = mkdtempSync(join(tmpdir(), `ar-tests-${process.pid}-`));
  process.once('exit', () => {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
    } catch {
      // best effort: a child still writing into it, or a mount below it
    }
  });
  return dir;
}
