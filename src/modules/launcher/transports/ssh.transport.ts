/**
 * The ssh launcher transport: every remote command is one fully quoted POSIX shell line (see
 * remote-command.ts), run over the host's one shared connection (ssh-connection.ts).
 */
import type { HostSpec } from '../../../config/router-config.js';
import { LaunchError } from '../launcher.transport.js';
import type { LaunchErrorCode, LaunchedProcess, LaunchSpec, LauncherTransport, PidIdentity, StopSpec } from '../launcher.transport.js';
import { buildAliveLine, buildIdentifyLine, buildLaunchLine, buildSignalLine, buildStopCommandLine, buildTailLine } from '../remote-command.js';
import { isSignalablePid, parseAliveOutput, parseEchoedPid, parseIdentifyOutput } from '../remote-command.js';
import { SshConnection } from './ssh-connection.js';
import { SshExecutor, type ExecResult } from './ssh-exec.js';
import { terminateGroup } from './terminate-group.js';

/** Tuning knobs; all optional. */
export interface SshTransportOptions {
  /** SSH handshake + auth deadline (default 20 s). */
  readonly readyTimeoutMs?: number;
  /** Deadline of every remote command (default 60 s). */
  readonly commandTimeoutMs?: number;
  /** Receives warnings and connection events (never key material). */
  readonly logger?: (msg: string) => void;
  /** How often stop() asks whether the group is gone (default 250 ms). */
  readonly pollIntervalMs?: number;
  /** How long stop() waits for the group to vanish after SIGKILL (default 2 s). */
  readonly afterKillWaitMs?: number;
}

/** Launches, stops and probes replicas on one ssh host. */
export class SshTransport implements LauncherTransport {
  readonly kind = 'ssh' as const;
  private readonly connection: SshConnection;
  private readonly where: string;
  private readonly pollIntervalMs: number;
  private readonly afterKillWaitMs: number;
  private readonly executor: SshExecutor;

  constructor(host: HostSpec, opts: SshTransportOptions = {}) {
    const ssh = host.ssh;
    if (ssh === null) throw new TypeError(`host '${host.name}' has no ssh destination; use the local transport`);
    this.connection = new SshConnection({ ...host, ssh }, opts.logger ?? (() => undefined), opts.readyTimeoutMs ?? 20_000);
    this.where = this.connection.where;
    this.pollIntervalMs = opts.pollIntervalMs ?? 250;
    this.afterKillWaitMs = opts.afterKillWaitMs ?? 2_000;
    this.executor = new SshExecutor(
      () => this.connection.get(),
      () => this.connection.forget(),
      opts.commandTimeoutMs ?? 60_000,
    );
  }

  /** Start the replica detached on the remote host; resolves with the pid the shell echoed. */
  async launch(spec: LaunchSpec): Promise<LaunchedProcess> {
    const line = this.build('spawn_failed', () => buildLaunchLine(spec));
    const res = await this.run(line, `launch of slot ${spec.slot.name}`, 'remote_command_failed');
    const pid = parseEchoedPid(res.stdout);
    if (pid === null) {
      throw new LaunchError('remote_command_failed', `launch of slot ${spec.slot.name} on ${this.where} did not echo a pid; output: ${outputTail(res)}`);
    }
    return { pid };
  }

  /** Run the stop command (exec'd, so `pkill -f` cannot hit its shell), or TERM → KILL the group. */
  async stop(spec: StopSpec): Promise<void> {
    if (spec.stopArgv !== undefined && spec.stopArgv.length > 0) {
      const stopArgv = spec.stopArgv;
      const line = this.build('stop_failed', () => buildStopCommandLine({ stopArgv, env: spec.env, workdir: spec.workdir }));
      await this.run(line, `stop_command '${stopArgv[0]}'`, 'stop_failed');
      return;
    }
    const pid = spec.pid;
    if (pid === null) throw new LaunchError('stop_failed', `no pid recorded and no stop_command for ${this.where}: nothing to stop`);
    if (!isSignalablePid(pid)) throw new LaunchError('stop_failed', `refusing to signal pid ${pid} on ${this.where}`);
    const group = { signal: (s: 'TERM' | 'KILL') => this.signal(pid, s), isAlive: () => this.isAlive(pid) };
    await terminateGroup(group, { killAfterMs: spec.killAfterMs, pollIntervalMs: this.pollIntervalMs, afterKillWaitMs: this.afterKillWaitMs });
  }

  /** True while the remote group led by `pid` (or the pid) exists. */
  async isAlive(pid: number): Promise<boolean> {
    const res = await this.run(buildAliveLine(pid), `liveness check of pid ${pid}`, 'remote_command_failed');
    const alive = parseAliveOutput(res.stdout);
    if (alive === null) {
      throw new LaunchError('remote_command_failed', `liveness check of pid ${pid} on ${this.where} gave an unexpected answer: ${outputTail(res)}`);
    }
    return alive;
  }

  /** Whether the remote `pid` (or its group) holds the socket listening on `port` (see the interface). */
  async identify(pid: number, port: number): Promise<PidIdentity> {
    if (!isSignalablePid(pid)) return { proven: false, reason: `pid ${pid} is not a replica process id` };
    let answer;
    try {
      const res = await this.run(buildIdentifyLine(pid, port), `identity check of pid ${pid}`, 'remote_command_failed');
      answer = parseIdentifyOutput(res.stdout);
      if (answer === null) return { proven: false, reason: `the identity check of pid ${pid} on ${this.where} gave an unexpected answer: ${outputTail(res)}` };
    } catch (err) {
      return { proven: false, reason: err instanceof Error ? err.message : String(err) };
    }
    switch (answer) {
      case 'proven':
        return { proven: true };
      case 'dead':
        return { proven: false, reason: `pid ${pid} is not alive on ${this.where}` };
      case 'no-proc':
        return { proven: false, reason: `${this.where} has no /proc to inspect sockets` };
      case 'no-listener':
        return { proven: false, reason: `no socket listens on port ${port} on ${this.where}` };
      default:
        return { proven: false, reason: `neither pid ${pid} nor its process group holds the socket listening on port ${port} on ${this.where}` };
    }
  }

  /** `tail -n N` of the remote log; [] when it does not exist. */
  async tailLog(logPath: string, lines: number): Promise<string[]> {
    if (lines <= 0) return [];
    const res = await this.run(buildTailLine(logPath, lines), `tail of ${logPath}`, 'remote_command_failed');
    const out = res.stdout.split('\n');
    if (out.at(-1) === '') out.pop();
    return out;
  }

  /** End the connection (a later call connects again). */
  close(): Promise<void> {
    return this.connection.close();
  }

  private build(code: LaunchErrorCode, make: () => string): string {
    try {
      return make();
    } catch (err) {
      throw new LaunchError(code, `${this.where}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** Exec and require exit status 0. */
  private async run(line: string, what: string, code: LaunchErrorCode): Promise<ExecResult> {
    const res = await this.executor.exec(line, `${what} on ${this.where}`, code);
    if (res.code !== 0) {
      const how = res.code === null ? `was killed by ${res.signal ?? 'a signal'}` : `exited with code ${res.code}`;
      throw new LaunchError(code, `${what} on ${this.where} ${how}; output: ${outputTail(res)}`);
    }
    return res;
  }

  /** Send a signal to the group (or pid); false when the process is already gone. */
  private async signal(pid: number, signal: 'TERM' | 'KILL'): Promise<boolean> {
    const res = await this.executor.exec(buildSignalLine(pid, signal), `kill -${signal} of pid ${pid} on ${this.where}`, 'stop_failed');
    if (res.code === 0) return true;
    if (!(await this.isAlive(pid))) return false;
    throw new LaunchError('stop_failed', `cannot send SIG${signal} to pid ${pid} on ${this.where}: ${outputTail(res)}`);
  }
}

const OUTPUT_TAIL_CHARS = 800;

function outputTail(res: ExecResult): string {
  const all = `${res.stdout}${res.stderr}`.trim();
  return all === '' ? '(no output)' : all.slice(-OUTPUT_TAIL_CHARS);
}
