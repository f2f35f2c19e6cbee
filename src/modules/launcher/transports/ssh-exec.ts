/**
 * Runs command lines over a shared ssh2 connection: bounded concurrency (below OpenSSH's default
 * MaxSessions of 10), a deadline per command, output capture, and one retry on a fresh connection
 * when a channel could not even be opened (nothing ran, so retrying is safe).
 */
import type { Client, ClientChannel } from 'ssh2';

import { LaunchError, type LaunchErrorCode } from '../launcher.transport.js';

/** How a remote command ended and what it printed. */
export interface ExecResult {
  /** Exit status, or null when it was killed by a signal. */
  readonly code: number | null;
  /** e.g. `SIGTERM` when killed by a signal. */
  readonly signal: string | null;
  /** Standard output (the last 8 MiB at most). */
  readonly stdout: string;
  /** Standard error (the last 4 KiB at most). */
  readonly stderr: string;
}

const MAX_STDOUT_BYTES = 8 * 1024 * 1024;
const MAX_STDERR_CHARS = 4096;

/** The channel could not be opened: the command did not run. */
class ChannelOpenError extends Error {}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Executes commands on whatever connection `connect` yields (the owner caches and re-creates it). */
export class SshExecutor {
  private active = 0;
  private readonly queue: Array<() => void> = [];

  constructor(
    private readonly connect: () => Promise<Client>,
    private readonly forget: () => void,
    private readonly timeoutMs: number,
    private readonly maxConcurrent = 8,
  ) {}

  /**
   * Run `command` (one shell line). Resolves with its exit status and output whatever the status;
   * rejects (with `failCode`) only when it could not run, timed out or lost its connection, and
   * with the connect errors of `connect` (ssh_connect_failed, host_key_rejected).
   */
  async exec(command: string, what: string, failCode: LaunchErrorCode = 'remote_command_failed'): Promise<ExecResult> {
    await this.acquire();
    try {
      const client = await this.connect();
      try {
        return await this.runOn(client, command, what, failCode);
      } catch (err) {
        if (!(err instanceof ChannelOpenError)) throw err;
        this.forget();
        client.end();
        try {
          return await this.runOn(await this.connect(), command, what, failCode);
        } catch (retryErr) {
          if (retryErr instanceof ChannelOpenError) {
            throw new LaunchError(failCode, `${what}: cannot open an ssh channel: ${retryErr.message}`);
          }
          throw retryErr;
        }
      }
    } finally {
      this.release();
    }
  }

  private runOn(client: Client, command: string, what: string, failCode: LaunchErrorCode): Promise<ExecResult> {
    return new Promise<ExecResult>((resolve, reject) => {
      const onChannel = (err: Error | undefined, stream: ClientChannel): void => {
        if (err !== undefined) {
          reject(new ChannelOpenError(err.message));
          return;
        }
        const out: Buffer[] = [];
        let outBytes = 0;
        let stderr = '';
        let exit: { code: number | null; signal: string | null } | null = null;
        let timedOut = false;
        const timer = setTimeout(() => {
          timedOut = true;
          try {
            stream.signal('KILL'); // servers that honour signal requests (OpenSSH ≥ 7.9) end the command
          } catch {
            // the channel is already closing
          }
          stream.close();
          reject(new LaunchError(failCode, `${what} did not finish within ${this.timeoutMs} ms`));
        }, this.timeoutMs);
        stream.on('data', (chunk: Buffer) => {
          out.push(chunk);
          outBytes += chunk.length;
          while (outBytes > MAX_STDOUT_BYTES && out.length > 1) outBytes -= out.shift()?.length ?? 0;
        });
        stream.stderr.on('data', (chunk: Buffer) => {
          stderr = (stderr + chunk.toString('utf8')).slice(-MAX_STDERR_CHARS);
        });
        stream.on('exit', (code: number | null, signal?: string) => {
          exit = { code: typeof code === 'number' ? code : null, signal: signal ?? null };
        });
        stream.on('close', () => {
          clearTimeout(timer);
          if (timedOut) return;
          if (exit === null) {
            reject(new LaunchError(failCode, `${what}: the ssh connection closed before the command finished`));
            return;
          }
          resolve({ ...exit, stdout: Buffer.concat(out).toString('utf8'), stderr });
        });
      };
      try {
        client.exec(command, onChannel);
      } catch (err) {
        reject(new ChannelOpenError(message(err)));
      }
    });
  }

  private async acquire(): Promise<void> {
    if (this.active < this.maxConcurrent) {
      this.active++;
      return;
    }
    await new Promise<void>((wake) => this.queue.push(wake));
  }

  private release(): void {
    const next = this.queue.shift();
    if (next !== undefined)
      next(); // hand the permit over
    else this.active--;
  }
}
