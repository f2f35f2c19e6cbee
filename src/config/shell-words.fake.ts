/** Test support: what a POSIX shell makes of a command line, to check quoting against a real /bin/sh. */
import { execFileSync } from 'node:child_process';

/** The words `/bin/sh` splits `line` into (each printed NUL-terminated, so spaces and newlines survive). */
export function shellWords(line: string): string[] {
  const out = execFileSync('/bin/sh', ['-c', `printf '%s\\0' ${line}`], { encoding: 'utf8' });
  return out.split('\0').slice(0, -1);
}
