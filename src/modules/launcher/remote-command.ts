/**
 * Pure builders of the POSIX shell lines the ssh transport runs on a remote host.
 * Every word that comes from config or argv is single-quoted (see config/shell-quote.ts); the only
 * unquoted parts are fixed shell syntax, validated integers and `"$HOME"` for a leading `~/`.
 */
import { shellQuote } from '../../config/shell-quote.js';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** True for an integer pid that may be signalled: > 1 (0 and 1 would hit whole groups / init). */
export function isSignalablePid(pid: number): boolean {
  return Number.isSafeInteger(pid) && pid > 1 && pid <= 0x7fffffff;
}

function checkPid(pid: number): string {
  if (!isSignalablePid(pid)) {
    throw new RangeError(`pid ${String(pid)} is not a signalable process id (must be an integer > 1)`);
  }
  return String(pid);
}

/**
 * Quote a remote path. `~` / `~/x` and relative paths are anchored at `"$HOME"`, as an operator
 * typing them into ssh would expect, and so a relative log path names the same file whether or
 * not the line `cd`s into a workdir first. Everything after that prefix is literal.
 */
export function quotePath(path: string): string {
  if (path === '~') return '"$HOME"';
  if (path.startsWith('~/')) return `"$HOME"/${shellQuote(path.slice(2))}`;
  if (!path.startsWith('/')) return `"$HOME"/${shellQuote(path)}`;
  return shellQuote(path);
}

/** `env 'K=V'... 'argv0' 'arg'...` — env names are checked, argv[0] must not look like `K=V`. */
function envPrefixedArgv(argv: readonly string[], env: Readonly<Record<string, string>>, what: string): string {
  if (argv.length === 0) throw new TypeError(`${what}: argv is empty (no program to run)`);
  if (argv[0].includes('=')) {
    throw new TypeError(`${what}: program ${JSON.stringify(argv[0])} contains '=', which env would read as a variable`);
  }
  const words = ['env'];
  for (const [key, value] of Object.entries(env)) {
    if (!ENV_NAME.test(key)) {
      throw new TypeError(`${what}: env name ${JSON.stringify(key)} is not a valid shell variable name`);
    }
    words.push(shellQuote(`${key}=${value}`));
  }
  for (const word of argv) words.push(shellQuote(word));
  return words.join(' ');
}

/** What a remote launch needs (a subset of LaunchSpec). */
export interface RemoteLaunchSpec {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly logPath: string;
  readonly workdir?: string;
}

/**
 * `mkdir -p "$(dirname L)" && cd W && { setsid nohup env K=V... argv... >> L 2>&1 < /dev/null & echo $!; }`
 *
 * `cd` comes before `nohup` (never `nohup cd`; it is omitted without a workdir). The braces make
 * `&` background only the replica: `$!` is then the replica's own pid, which `setsid` made a
 * session and process-group leader (without them bash backgrounds the whole `&&` list and echoes
 * the pid of a subshell), and a failing `mkdir`/`cd` shows in the exit status.
 */
export function buildLaunchLine(spec: RemoteLaunchSpec): string {
  const log = quotePath(spec.logPath);
  const parts = [`mkdir -p "$(dirname ${log})"`];
  if (spec.workdir !== undefined) parts.push(`cd ${quotePath(spec.workdir)}`);
  const run = `setsid nohup ${envPrefixedArgv(spec.argv, spec.env, 'launch')} >> ${log} 2>&1 < /dev/null`;
  parts.push(`{ ${run} & echo $!; }`);
  return parts.join(' && ');
}

/** What a remote stop command needs (a subset of StopSpec). */
export interface RemoteStopCommandSpec {
  readonly stopArgv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly workdir?: string;
}

/**
 * `cd W && exec env K=V... stopArgv...` — `exec` replaces the remote shell, so a
 * `pkill -f <pattern>` stop command cannot match (and kill) the shell whose command line
 * contains the pattern.
 */
export function buildStopCommandLine(spec: RemoteStopCommandSpec): string {
  const run = `exec ${envPrefixedArgv(spec.stopArgv, spec.env, 'stop_command')}`;
  return spec.workdir === undefined ? run : `cd ${quotePath(spec.workdir)} && ${run}`;
}

/**
 * Signal the process group led by `pid`, falling back to the pid alone (a pid that is not a group
 * leader). Uses `kill -s SIG -- -PID`, the POSIX form that dash's builtin accepts too
 * (dash rejects `kill -TERM -- -PID`). Exit status 0 when either signal was delivered.
 */
export function buildSignalLine(pid: number, signal: 'TERM' | 'KILL'): string {
  const p = checkPid(pid);
  return `kill -s ${signal} -- -${p} 2>/dev/null || kill -s ${signal} ${p}`;
}

/** Prints `alive` while the group led by `pid` (or the pid itself) exists, else `gone`. */
export function buildAliveLine(pid: number): string {
  const p = checkPid(pid);
  return `if kill -s 0 -- -${p} 2>/dev/null || kill -s 0 ${p} 2>/dev/null; then echo alive; else echo gone; fi`;
}

/** Parse the output of buildAliveLine; null when it is neither answer. */
export function parseAliveOutput(stdout: string): boolean | null {
  const answer = stdout.trim();
  if (answer === 'alive') return true;
  if (answer === 'gone') return false;
  return null;
}

/** What the line of buildIdentifyLine prints. */
export type IdentifyAnswer = 'proven' | 'dead' | 'no-proc' | 'no-listener' | 'other';

/**
 * Prints `proven` when the pid, or a live member of the process group it leads, holds the socket
 * listening on `port` (Linux /proc on the remote machine); otherwise `dead` (neither the group
 * nor the pid exists), `no-proc` (no /proc/net/tcp), `no-listener` (nothing listens on the port)
 * or `other` (something else does). Only builtins loop over /proc; `ls` runs only for the pid and
 * the members of its group.
 */
export function buildIdentifyLine(pid: number, port: number): string {
  const p = checkPid(pid);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port ${String(port)} is not a TCP port`);
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  return [
    `if ! { kill -s 0 -- -${p} 2>/dev/null || kill -s 0 ${p} 2>/dev/null; }; then echo dead; exit 0; fi`,
    `[ -r /proc/net/tcp ] || { echo no-proc; exit 0; }`,
    `ino=$(awk '$4 == "0A" && $2 ~ /:${hex}$/ { print $10 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)`,
    `[ -n "$ino" ] || { echo no-listener; exit 0; }`,
    `for d in /proc/${p} /proc/[0-9]*; do s=; read -r s < "$d/stat" || continue; s=\${s##*) }; set -- $s;` +
      ` { [ "$d" = /proc/${p} ] || [ "$3" = ${p} ]; } || continue; [ "$1" = Z ] && continue;` +
      ` l=$(ls -l "$d/fd" 2>/dev/null) || continue;` +
      ` for i in $ino; do case "$l" in *"socket:[$i]"*) echo proven; exit 0;; esac; done; done 2>/dev/null`,
    'echo other',
  ].join('; ');
}

/** Parse the output of buildIdentifyLine; null when it is none of its answers. */
export function parseIdentifyOutput(stdout: string): IdentifyAnswer | null {
  const answer = stdout.trim();
  return answer === 'proven' || answer === 'dead' || answer === 'no-proc' || answer === 'no-listener' || answer === 'other' ? answer : null;
}

/** `tail -n N L`, succeeding with no output when the log does not exist (yet). */
export function buildTailLine(logPath: string, lines: number): string {
  if (!Number.isSafeInteger(lines) || lines < 1) {
    throw new RangeError(`tail line count ${String(lines)} must be a positive integer`);
  }
  const log = quotePath(logPath);
  return `if [ -e ${log} ]; then tail -n ${lines} ${log}; fi`;
}

/** The pid echoed by the launch line (its last non-empty output line), or null if it is not one. */
export function parseEchoedPid(stdout: string): number | null {
  const lines = stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  const last = lines.at(-1);
  if (last === undefined || !/^[0-9]{1,10}$/.test(last)) return null;
  const pid = Number(last);
  return isSignalablePid(pid) ? pid : null;
}
