/**
 * An in-process `ssh2` server for tests: public-key auth only (signatures verified), `exec`
 * requests run `/bin/sh -c <command>` as the current user, and every command line received is
 * recorded in `execLog` so tests can check quoting.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { constants as osConstants, homedir, userInfo } from 'node:os';
import { join } from 'node:path';

import ssh2 from 'ssh2';
import type { AuthContext, Connection, ParsedKey, ServerChannel } from 'ssh2';

import { ed25519KeyPair } from './ssh-keys.fake.js';
import { tempDir } from '../../../common/temp-dir.fake.js';

/** A running test server. */
export interface TestSshServer {
  readonly port: number;
  /** Address it listens on (127.0.0.1 unless asked otherwise). */
  readonly host: string;
  /** Private key (mode 0600) the server accepts. */
  readonly identityFile: string;
  /** A known_hosts file with one line: `[host]:port type base64`. */
  readonly knownHostsFile: string;
  /** `SHA256:...` of the server's host key. */
  readonly hostKeyFingerprint: string;
  /** The host public key as `type base64`. */
  readonly hostPublicKey: string;
  /** Every exec command line received, in order. */
  readonly execLog: string[];
  /** How each finished exec ended (exit code, or the signal that killed its shell), in order of finishing. */
  readonly execResults: ExecOutcome[];
  /** TCP connections accepted so far. */
  readonly connections: number;
  /** Connections that passed authentication so far. */
  readonly authenticated: number;
  /** Connections open right now. */
  readonly openConnections: number;
  /** Temp directory holding the key files (removed by close()). */
  readonly dir: string;
  /** Abruptly end every open client connection (the server keeps listening). */
  dropConnections(): void;
  close(): Promise<void>;
}

/** How one exec request's shell ended. */
export interface ExecOutcome {
  readonly command: string;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** Options of startSshServer. */
export interface TestSshServerOptions {
  /** The only user name accepted (default: the current user). */
  readonly acceptUser?: string;
  /** Listen address (default 127.0.0.1; `::1` for IPv6 tests). */
  readonly host?: string;
}

function parse(key: string): ParsedKey {
  const parsed = ssh2.utils.parseKey(key);
  if (parsed instanceof Error) throw parsed;
  return parsed;
}

function publicLine(key: ParsedKey): string {
  return `${key.type} ${key.getPublicSSH().toString('base64')}`;
}

/** Start a server on an ephemeral port with fresh host and client keys. */
export async function startSshServer(opts: TestSshServerOptions = {}): Promise<TestSshServer> {
  const acceptUser = opts.acceptUser ?? userInfo().username;
  const listenHost = opts.host ?? '127.0.0.1';
  const dir = tempDir('test-sshd-');
  const hostPair = ed25519KeyPair();
  const clientPair = ed25519KeyPair();
  const hostKey = parse(hostPair.public);
  const clientKey = parse(clientPair.public);
  const identityFile = join(dir, 'id_ed25519');
  await writeFile(identityFile, clientPair.private, { mode: 0o600 });
  await writeFile(`${identityFile}.pub`, `${clientPair.public}\n`, { mode: 0o644 });

  const execLog: string[] = [];
  const execResults: ExecOutcome[] = [];
  const conns = new Set<Connection>();
  const children = new Set<ChildProcess>();
  let connections = 0;
  let authenticated = 0;

  const authenticate = (ctx: AuthContext): void => {
    if (ctx.method !== 'publickey' || ctx.username !== acceptUser) {
      ctx.reject(['publickey']);
      return;
    }
    const offered = ctx.key;
    if (offered.algo !== clientKey.type || !offered.data.equals(clientKey.getPublicSSH())) {
      ctx.reject(['publickey']);
      return;
    }
    if (ctx.signature === undefined || ctx.blob === undefined) {
      ctx.accept(); // key query: "would you accept this key?"
      return;
    }
    if (clientKey.verify(ctx.blob, ctx.signature, ctx.hashAlgo)) ctx.accept();
    else ctx.reject(['publickey']);
  };

  const runExec = (channel: ServerChannel, command: string): void => {
    const child = spawn('/bin/sh', ['-c', command], { cwd: homedir(), stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    child.stdout.pipe(channel, { end: false });
    child.stderr.pipe(channel.stderr, { end: false });
    child.on('error', (err) => {
      channel.stderr.write(`${err.message}\n`);
      channel.exit(127);
      channel.end();
    });
    child.on('close', (code, signal) => {
      children.delete(child);
      execResults.push({ command, code, signal });
      if (code !== null) channel.exit(code);
      else {
        try {
          channel.exit(signal ?? 'KILL', false, '');
        } catch {
          const n = signal === null ? 9 : (osConstants.signals[signal] ?? 9);
          channel.exit(128 + n);
        }
      }
      channel.end();
    });
  };

  const server = new ssh2.Server({ hostKeys: [hostPair.private] }, (conn) => {
    connections++;
    conns.add(conn);
    conn.on('close', () => conns.delete(conn));
    conn.on('error', () => undefined);
    conn.on('authentication', authenticate);
    conn.on('ready', () => {
      authenticated++;
      conn.on('session', (acceptSession) => {
        const session = acceptSession();
        session.on('exec', (accept, _reject, info) => {
          execLog.push(info.command);
          runExec(accept(), info.command);
        });
      });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, listenHost, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('test ssh server has no TCP address');
  const port = address.port;
  const knownHostsFile = join(dir, 'known_hosts');
  await writeFile(knownHostsFile, `[${listenHost}]:${port} ${publicLine(hostKey)}\n`);
  const fingerprint = `SHA256:${createHash('sha256').update(hostKey.getPublicSSH()).digest('base64').replace(/=+$/, '')}`;

  return {
    port,
    host: listenHost,
    identityFile,
    knownHostsFile,
    hostKeyFingerprint: fingerprint,
    hostPublicKey: publicLine(hostKey),
    execLog,
    execResults,
    get connections() {
      return connections;
    },
    get authenticated() {
      return authenticated;
    },
    get openConnections() {
      return conns.size;
    },
    dir,
    dropConnections() {
      for (const conn of conns) conn.end();
    },
    async close() {
      for (const child of children) child.kill('SIGKILL');
      for (const conn of conns) conn.end();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
