/**
 * Starts the system OpenSSH server (/usr/sbin/sshd) for tests, on a free loopback port with its
 * own temp config, host key and authorized key. Only possible as root; otherwise (or without
 * sshd) startRealSshd() returns null and the tests skip, unless REQUIRE_SSHD=1 (set by .ci/run
 * when it runs as root): then an unavailable sshd is an error, so CI cannot pass by skipping.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { freePort } from '../../../common/free-port.fake.js';
import { ed25519KeyPair } from './ssh-keys.fake.js';
import { tempDir } from '../../../common/temp-dir.fake.js';

const SSHD = '/usr/sbin/sshd';

/** A running sshd. */
export interface RealSshd {
  readonly port: number;
  /** The user it accepts (the current user, root). */
  readonly user: string;
  readonly identityFile: string;
  /** One line: `[127.0.0.1]:port type base64`. */
  readonly knownHostsFile: string;
  readonly hostKeyFingerprint: string;
  close(): Promise<void>;
}

/**
 * Why startRealSshd() would return null, for the skip message; null when sshd can run. Throws
 * instead when REQUIRE_SSHD=1, so a required real-sshd test fails rather than skips.
 */
export function realSshdUnavailableReason(): string | null {
  const reason = !existsSync(SSHD) ? `${SSHD} is not installed` : process.getuid?.() !== 0 ? 'tests are not running as root' : null;
  if (reason !== null && process.env['REQUIRE_SSHD'] === '1') {
    throw new Error(`REQUIRE_SSHD=1 but the real-sshd tests cannot run: ${reason}`);
  }
  return reason;
}

function accepts(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const sock = createConnection({ host: '127.0.0.1', port });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

/** Start sshd, or null when it is unavailable (see realSshdUnavailableReason). Throws if it fails to start. */
export async function startRealSshd(): Promise<RealSshd | null> {
  if (realSshdUnavailableReason() !== null) return null;
  const dir = tempDir('real-sshd-');
  const hostPair = ed25519KeyPair();
  const clientPair = ed25519KeyPair();
  const hostKeyFile = join(dir, 'ssh_host_ed25519_key');
  const identityFile = join(dir, 'id_ed25519');
  const authorizedKeys = join(dir, 'authorized_keys');
  await writeFile(hostKeyFile, hostPair.private, { mode: 0o600 });
  await writeFile(identityFile, clientPair.private, { mode: 0o600 });
  await writeFile(authorizedKeys, `${clientPair.public}\n`, { mode: 0o600 });
  await mkdir('/run/sshd', { recursive: true, mode: 0o755 }); // privilege separation directory

  const port = await freePort();
  const config = join(dir, 'sshd_config');
  await writeFile(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKeyFile}`,
      `AuthorizedKeysFile ${authorizedKeys}`,
      'PermitRootLogin prohibit-password',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'StrictModes no',
      `PidFile ${join(dir, 'sshd.pid')}`,
      'LogLevel ERROR',
      '',
    ].join('\n'),
  );
  // A watchdog shell owns sshd and kills it (and removes the temp dir) once our end of its stdin
  // closes: on close(), and also when this test process dies without running its after() hooks
  // (e.g. killed by --test-timeout).
  const watchdog = '"$0" -D -e -f "$1" & sshd=$!; read _ignored; kill "$sshd" 2>/dev/null; wait "$sshd"; rm -rf "$2"';
  const sshd = spawn('/bin/sh', ['-c', watchdog, SSHD, config, dir], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  sshd.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4000);
  });
  let exited = false;
  const gone = new Promise<void>((resolve) =>
    sshd.once('exit', () => {
      exited = true;
      resolve();
    }),
  );

  const stop = async (): Promise<void> => {
    sshd.stdin.end(); // the watchdog kills sshd and exits once it is gone
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([gone, new Promise<void>((done) => (timer = setTimeout(done, 5_000)))]);
    clearTimeout(timer);
  };

  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (exited || Date.now() > deadline) {
      await stop();
      throw new Error(`sshd did not start listening on 127.0.0.1:${port}: ${stderr.trim() || '(no output)'}`);
    }
    await sleep(50);
  }

  const blob = Buffer.from(hostPair.public.split(' ')[1], 'base64');
  const knownHostsFile = join(dir, 'known_hosts');
  await writeFile(knownHostsFile, `[127.0.0.1]:${port} ${hostPair.public.split(' ').slice(0, 2).join(' ')}\n`);
  return {
    port,
    user: userInfo().username,
    identityFile,
    knownHostsFile,
    hostKeyFingerprint: `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`,
    close: stop,
  };
}
