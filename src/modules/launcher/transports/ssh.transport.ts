/**
 * The ssh launcher transport: one `ssh2` connection per host (lazy, reused, re-created after it
 * closed), host keys checked against known_hosts, every remote command one fully quoted POSIX
 * shell line (see remote-command.ts). Key material never appears in errors or logs; only paths.
 */
import { readFile } from 'node:fs/promises';
import { homedir, userInfo } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import type { Client } from 'ssh2';

import type { HostSpec } from '../../../config/router-config.js';
import {
  LaunchError,
  type LaunchErrorCode,
  type LaunchedProcess,
  type LaunchSpec,
  type LauncherTransport,
  type PidIdentity,
  type StopSpec,
} from '../launcher.transport.js';
import {
  buildAliveLine,
  buildIdentifyLine,
  buildLaunchLine,
  buildSignalLine,
  buildStopCommandLine,
  buildTailLine,
  isSignalablePid,
  parseAliveOutput,
  parseEchoedPid,
  parseIdentifyOutput,
} from '../remote-command.js';
import { checkHostKey } from './known-hosts.js';
import { SshExecutor, type ExecResult } from './ssh-exec.js';

type Ssh2 = typeof import('ssh2');
let ssh2Module: Ssh2 | undefined;

/** The ssh2 library, loaded on first use: a router without ssh hosts does not carry it (~15 MB). */
function ssh2(): Ssh2 {
  ssh2Module ??= createRequire(import.meta.url)('ssh2') as Ssh2;
  return ssh2Module;
}

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

/** Where to connect: `user@host`, `host` (current user) or `user@[::1]`. */
export interface SshDestination {
  readonly user: string;
  readonly host: string;
}

/** Parse a host's `ssh` field; the user defaults to the router's own user. */
export function parseSshDestination(ssh: string): SshDestination {
  const at = ssh.lastIndexOf('@');
  const user = at >= 0 ? ssh.slice(0, at) : userInfo().username;
  let host = ssh.slice(at + 1);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (user === '' || host === '') throw new TypeError(`ssh destination ${JSON.stringify(ssh)} needs a host (and a non-empty user before '@')`);
  return { user, host };
}

const DEFAULT_KEYS = ['id_ed25519', 'id_ecdsa', 'id_rsa'];

/** Launches, stops and probes replicas on one ssh host. */
export class SshTransport implements LauncherTransport {
  readonly kind = 'ssh' as const;
  private readonly dest: SshDestination;
  private readonly where: string;
  private readonly log: (msg: string) => void;
  private readonly readyTimeoutMs: number;
  private readonly pollIntervalMs: number;
  private readonly afterKillWaitMs: number;
  private readonly executor: SshExecutor;
  private pending: Promise<Client> | null = null;
  private current: Client | null = null;
  private warnedInsecure = false;

  constructor(
    private readonly host: HostSpec,
    opts: SshTransportOptions = {},
  ) {
    if (host.ssh === null) throw new TypeError(`host '${host.name}' has no ssh destination; use the local transport`);
    this.dest = parseSshDestination(host.ssh);
    this.where = `host '${host.name}' (${this.dest.user}@${this.dest.host} port ${host.sshPort})`;
    this.log = opts.logger ?? (() => undefined);
    this.readyTimeoutMs = opts.readyTimeoutMs ?? 20_000;
    this.pollIntervalMs = opts.pollIntervalMs ?? 250;
    this.afterKillWaitMs = opts.afterKillWaitMs ?? 2_000;
    this.executor = new SshExecutor(() => this.connection(), () => this.dropConnection(), opts.commandTimeoutMs ?? 60_000);
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
    if (!(await this.signal(pid, 'TERM'))) return;
    const termDeadline = Date.now() + spec.killAfterMs;
    while (Date.now() < termDeadline) {
      if (!(await this.isAlive(pid))) return;
      await sleep(Math.min(this.pollIntervalMs, Math.max(1, termDeadline - Date.now())));
    }
    if (!(await this.signal(pid, 'KILL'))) return;
    const killDeadline = Date.now() + this.afterKillWaitMs;
    while (Date.now() < killDeadline && (await this.isAlive(pid))) await sleep(this.pollIntervalMs);
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
  async close(): Promise<void> {
    const client = this.current;
    this.dropConnection();
    if (client === null) return;
    let timer: NodeJS.Timeout | undefined;
    const closed = new Promise<void>((done) => {
      client.once('close', () => done());
      timer = setTimeout(done, 2_000); // a socket that is already gone emits no further 'close'
    });
    client.end();
    await closed;
    clearTimeout(timer);
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

  private dropConnection(): void {
    this.pending = null;
    this.current = null;
  }

  /** The shared connection, created on first use and again after it closed. */
  private connection(): Promise<Client> {
    if (this.pending !== null) return this.pending;
    const attempt = this.connect();
    this.pending = attempt;
    attempt.catch(() => {
      if (this.pending === attempt) this.dropConnection();
    });
    return attempt;
  }

  private async connect(): Promise<Client> {
    const identity = await this.readIdentity();
    return new Promise<Client>((resolve, reject) => {
      const client = new (ssh2().Client)();
      this.current = client; // so close() also ends a connection still in its handshake
      let ready = false;
      let hostKeyError: LaunchError | null = null;
      client.on('ready', () => {
        ready = true;
        this.log(`ssh connected to ${this.where}`);
        resolve(client);
      });
      client.on('error', (err: Error) => {
        if (ready) {
          this.log(`WARNING: ssh connection to ${this.where} failed: ${err.message}`);
          return;
        }
        const detail = `cannot connect to ${this.where} with identity_file ${identity.path}: ${err.message}`;
        reject(hostKeyError ?? new LaunchError('ssh_connect_failed', detail));
      });
      client.on('close', () => {
        if (this.current === client) this.dropConnection();
        if (!ready) reject(hostKeyError ?? new LaunchError('ssh_connect_failed', `connection to ${this.where} closed during the handshake`));
      });
      client.connect({
        host: this.dest.host,
        port: this.host.sshPort,
        username: this.dest.user,
        privateKey: identity.key,
        keepaliveInterval: 15_000,
        readyTimeout: this.readyTimeoutMs,
        hostVerifier: (key: Buffer, verify: (ok: boolean) => void) => {
          this.verifyHostKey(key).then(
            (rejection) => {
              hostKeyError = rejection;
              verify(rejection === null);
            },
            (err: unknown) => {
              hostKeyError = new LaunchError('host_key_rejected', `cannot check the host key of ${this.where}: ${String(err)}`);
              verify(false);
            },
          );
        },
      });
    });
  }

  /** null when the key is accepted, else the error to report. */
  private async verifyHostKey(key: Buffer): Promise<LaunchError | null> {
    const file = this.host.knownHosts ?? join(homedir(), '.ssh', 'known_hosts');
    const rejection = await checkHostKey({ file, host: this.dest.host, port: this.host.sshPort, where: this.where, key });
    if (rejection === null) return null;
    if (this.host.insecureAcceptHostKey) {
      if (!this.warnedInsecure) {
        this.warnedInsecure = true;
        this.log(`WARNING: accepting an unverified host key because insecure_accept_host_key is true: ${rejection.problem}`);
      }
      return null;
    }
    return new LaunchError(
      'host_key_rejected',
      `${rejection.problem}. To fix: ${rejection.fix}; or set "insecure_accept_host_key": true for host '${this.host.name}' (not recommended).`,
    );
  }

  /** The private key bytes; errors name only the path, never the contents. */
  private async readIdentity(): Promise<{ key: Buffer; path: string }> {
    const explicit = this.host.identityFile;
    const candidates = explicit !== undefined ? [explicit] : DEFAULT_KEYS.map((k) => join(homedir(), '.ssh', k));
    for (const path of candidates) {
      let key: Buffer;
      try {
        key = await readFile(path);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? 'read error';
        if (explicit === undefined && code === 'ENOENT') continue;
        throw new LaunchError('ssh_connect_failed', `cannot read identity_file ${path} for ${this.where}: ${code}`);
      }
      const parsed = ssh2().utils.parseKey(key);
      if (parsed instanceof Error) {
        const why = /passphrase|encrypt/i.test(parsed.message)
          ? 'it is passphrase-protected (not supported: use an unencrypted key readable only by the router user)'
          : 'it is not a supported OpenSSH/PEM private key';
        throw new LaunchError('ssh_connect_failed', `identity_file ${path} for ${this.where} cannot be used: ${why}`);
      }
      return { key, path };
    }
    throw new LaunchError('ssh_connect_failed', `${this.where} has no identity_file and none of ${candidates.join(', ')} exists`);
  }
}

const OUTPUT_TAIL_CHARS = 800;

function outputTail(res: ExecResult): string {
  const all = `${res.stdout}${res.stderr}`.trim();
  return all === '' ? '(no output)' : all.slice(-OUTPUT_TAIL_CHARS);
}
