/**
 * The one ssh2 connection of an ssh host: created on first use, shared, created again after it
 * closed. The host key is checked against known_hosts (or accepted with one warning under
 * `insecure_accept_host_key`); the identity is `identity_file` or the first of ~/.ssh/id_*.
 * Key material never appears in errors or logs, only paths.
 */
import { readFile } from 'node:fs/promises';
import { homedir, userInfo } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import type { Client } from 'ssh2';

import type { HostSpec } from '../../../config/router-config.js';
import { LaunchError } from '../launcher.transport.js';
import { checkHostKey } from './known-hosts.js';

type Ssh2 = typeof import('ssh2');
let ssh2Module: Ssh2 | undefined;

/** The ssh2 library, loaded on first use: a router without ssh hosts does not carry it (~15 MB). */
function ssh2(): Ssh2 {
  ssh2Module ??= createRequire(import.meta.url)('ssh2') as Ssh2;
  return ssh2Module;
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

/** The shared connection of one host (see the file comment). */
export class SshConnection {
  private readonly dest: SshDestination;
  /** `host 'name' (user@host port N)`, the prefix of every error about this host. */
  readonly where: string;
  private pending: Promise<Client> | null = null;
  private current: Client | null = null;
  private warnedInsecure = false;

  constructor(
    private readonly host: HostSpec & { readonly ssh: string },
    private readonly log: (msg: string) => void,
    private readonly readyTimeoutMs: number,
  ) {
    this.dest = parseSshDestination(host.ssh);
    this.where = `host '${host.name}' (${this.dest.user}@${this.dest.host} port ${host.sshPort})`;
  }

  /** The shared connection, created on first use and again after it closed. */
  get(): Promise<Client> {
    if (this.pending !== null) return this.pending;
    const attempt = this.connect();
    this.pending = attempt;
    attempt.catch(() => {
      if (this.pending === attempt) this.forget();
    });
    return attempt;
  }

  /** Stop handing out the current connection (the next get() connects again). */
  forget(): void {
    this.pending = null;
    this.current = null;
  }

  /** End the connection (a later get() connects again). */
  async close(): Promise<void> {
    const client = this.current;
    this.forget();
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
        if (this.current === client) this.forget();
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
