/**
 * The local launcher transport: replicas are detached children of the router, each the leader of
 * its own process group, with stdout+stderr appended to the slot's log file.
 */
import { spawn } from 'node:child_process';
import { mkdir, open, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

import { LaunchError } from '../launcher.transport.js';
import type { ExitInfo, LaunchedProcess, LaunchSpec, LauncherTransport, PidIdentity, StopSpec } from '../launcher.transport.js';
import { isSignalablePid } from '../remote-command.js';
import { identifyListener, isProcessGroupAlive, signalGroup, tailFile } from './process-probe.js';
import { terminateGroup } from './terminate-group.js';

/** Tuning knobs (tests shorten them). */
export interface LocalTransportOptions {
  /** Upper bound for a `stop_command` to finish (default 60 s). */
  readonly stopCommandTimeoutMs?: number;
  /** How often stop() checks whether the group is gone (default 100 ms). */
  readonly pollIntervalMs?: number;
  /** How long stop() waits for the group to vanish after SIGKILL (default 2 s). */
  readonly afterKillWaitMs?: number;
}

const OUTPUT_TAIL_CHARS = 800;

/** `~` and `~/x` mean the router user's home; relative paths are against the router's cwd. */
function localPath(path: string): string {
  if (path === '~') return homedir();
  if (path.startsWith('~/')) return join(homedir(), path.slice(2));
  return resolve(path);
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code !== undefined ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

/** Launches replicas on this machine with `child_process.spawn` (argv, never a shell). */
export class LocalTransport implements LauncherTransport {
  readonly kind = 'local' as const;
  private readonly stopCommandTimeoutMs: number;
  private readonly pollIntervalMs: number;
  private readonly afterKillWaitMs: number;

  constructor(opts: LocalTransportOptions = {}) {
    this.stopCommandTimeoutMs = opts.stopCommandTimeoutMs ?? 60_000;
    this.pollIntervalMs = opts.pollIntervalMs ?? 100;
    this.afterKillWaitMs = opts.afterKillWaitMs ?? 2_000;
  }

  /** Spawn detached in a new process group; resolves once the OS started the program. */
  async launch(spec: LaunchSpec): Promise<LaunchedProcess> {
    const slot = spec.slot.name;
    const program = spec.argv[0];
    if (program === undefined || program === '') {
      throw new LaunchError('spawn_failed', `slot ${slot}: argv is empty (no program to run)`);
    }
    const cwd = spec.workdir === undefined ? undefined : localPath(spec.workdir);
    if (cwd !== undefined) {
      const isDir = await stat(cwd).then(
        (s) => s.isDirectory(),
        () => false,
      );
      if (!isDir) {
        throw new LaunchError('spawn_failed', `slot ${slot}: workdir ${cwd} does not exist or is not a directory`);
      }
    }
    const logPath = localPath(spec.logPath);
    try {
      await mkdir(dirname(logPath), { recursive: true });
    } catch (err) {
      throw new LaunchError('log_unwritable', `slot ${slot}: cannot create log directory ${dirname(logPath)}: ${describe(err)}`);
    }
    let log;
    try {
      log = await open(logPath, 'a');
    } catch (err) {
      throw new LaunchError('log_unwritable', `slot ${slot}: cannot open log ${logPath} for append: ${describe(err)}`);
    }
    try {
      const child = spawn(program, spec.argv.slice(1), {
        detached: true,
        cwd,
        env: { ...spec.env },
        stdio: ['ignore', log.fd, log.fd],
      });
      const exited = new Promise<ExitInfo>((settle) => {
        child.once('exit', (code, signal) => settle({ code, signal }));
      });
      await new Promise<void>((started, failed) => {
        child.once('spawn', started);
        child.once('error', failed);
      }).catch((err: unknown) => {
        const why =
          (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such program (not an existing path, nor found on the PATH of the given env)' : describe(err);
        throw new LaunchError('spawn_failed', `slot ${slot}: cannot start '${program}': ${why}`);
      });
      child.on('error', () => undefined); // later errors (e.g. a failed kill) must not crash the router
      child.unref();
      const pid = child.pid;
      if (pid === undefined) throw new LaunchError('spawn_failed', `slot ${slot}: '${program}' started without a pid`);
      return { pid, exited };
    } finally {
      await log.close(); // the child holds its own copy of the descriptor
    }
  }

  /** Run the stop command, or SIGTERM the group, wait up to killAfterMs, then SIGKILL it. */
  async stop(spec: StopSpec): Promise<void> {
    if (spec.stopArgv !== undefined && spec.stopArgv.length > 0) {
      await this.runStopCommand(spec.stopArgv, spec);
      return;
    }
    const pid = spec.pid;
    if (pid === null) {
      throw new LaunchError('stop_failed', 'no pid recorded and no stop_command: nothing to stop');
    }
    if (!isSignalablePid(pid) || pid === process.pid) {
      throw new LaunchError('stop_failed', `refusing to signal pid ${pid}: not a replica process group`);
    }
    const group = { signal: (s: 'TERM' | 'KILL') => Promise.resolve(this.signal(pid, `SIG${s}`)), isAlive: () => isProcessGroupAlive(pid) };
    await terminateGroup(group, { killAfterMs: spec.killAfterMs, pollIntervalMs: this.pollIntervalMs, afterKillWaitMs: this.afterKillWaitMs });
  }

  /** True while the group led by `pid` (or the pid) exists; zombies count as gone. */
  async isAlive(pid: number): Promise<boolean> {
    if (!isSignalablePid(pid)) throw new RangeError(`pid ${pid} is not a signalable process id`);
    return isProcessGroupAlive(pid);
  }

  /** Whether `pid` (or its group) holds the socket listening on `port` here (see the interface). */
  async identify(pid: number, port: number): Promise<PidIdentity> {
    if (!isSignalablePid(pid) || pid === process.pid) return { proven: false, reason: `pid ${pid} is not a replica process id` };
    return identifyListener(pid, port).catch((err: unknown): PidIdentity => ({ proven: false, reason: `cannot inspect pid ${pid}: ${describe(err)}` }));
  }

  /** Last `lines` lines of the local log (read from the file's end); [] when it does not exist. */
  async tailLog(logPath: string, lines: number): Promise<string[]> {
    return tailFile(localPath(logPath), lines);
  }

  /** Nothing to release locally. */
  async close(): Promise<void> {}

  private signal(pid: number, signal: NodeJS.Signals): boolean {
    try {
      return signalGroup(pid, signal);
    } catch (err) {
      throw new LaunchError('stop_failed', `cannot send ${signal} to process group ${pid}: ${describe(err)}`);
    }
  }

  /** Spawn the stop command (argv, no shell), bounded; non-zero exit → stop_failed with its output. */
  private runStopCommand(argv: readonly string[], spec: StopSpec): Promise<void> {
    const program = argv[0];
    const cwd = spec.workdir === undefined ? undefined : localPath(spec.workdir);
    return new Promise<void>((done, fail) => {
      const child = spawn(program, argv.slice(1), { cwd, env: { ...spec.env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      const collect = (chunk: Buffer): void => {
        output = (output + chunk.toString('utf8')).slice(-4 * OUTPUT_TAIL_CHARS);
      };
      child.stdout.on('data', collect);
      child.stderr.on('data', collect);
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, this.stopCommandTimeoutMs);
      child.once('error', (err) => {
        clearTimeout(timer);
        fail(new LaunchError('stop_failed', `cannot start stop_command '${program}': ${describe(err)}`));
      });
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        const tail = output.trim() === '' ? '(no output)' : output.trim().slice(-OUTPUT_TAIL_CHARS);
        if (timedOut) {
          fail(
            new LaunchError('stop_failed', `stop_command '${program}' did not finish within ${this.stopCommandTimeoutMs} ms and was killed; output: ${tail}`),
          );
        } else if (code !== 0) {
          const how = code === null ? `was killed by ${signal ?? 'a signal'}` : `exited with code ${code}`;
          fail(new LaunchError('stop_failed', `stop_command '${program}' ${how}; output: ${tail}`));
        } else {
          done();
        }
      });
    });
  }
}
