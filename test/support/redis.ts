import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { freePort } from './sim-process.js';
import { waitFor } from './router.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

const REDIS_SERVER = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find((p) => existsSync(p));

/** A throwaway redis-server on a loopback port (no persistence). */
export interface TestRedis {
  readonly port: number;
  readonly url: string;
  stop(): Promise<void>;
  /** Start it again on the same port after stop(): with no persistence it comes back empty. */
  restart(): Promise<void>;
  /** Freeze it (SIGSTOP): connections stay open and every command hangs, as in a stalled Redis. */
  pause(): void;
  /** Thaw it after pause() (SIGCONT). */
  resume(): void;
}

/** A throwaway redis-server, or null when none is installed (an error instead with REQUIRE_REDIS=1, as .ci/run sets as root). */
export async function startRedis(): Promise<TestRedis | null> {
  if (REDIS_SERVER === undefined) {
    if (process.env['REQUIRE_REDIS'] === '1') throw new Error('REQUIRE_REDIS=1 but redis-server is not installed (/usr/bin or /usr/local/bin)');
    return null;
  }
  const port = await freePort();
  const dir = tempDir('ar-redis-');
  let child: ChildProcess | undefined;
  const launch = async (): Promise<void> => {
    child = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
    await waitFor(() => canConnect(port), 10_000, 'redis-server to listen');
  };
  const stop = async (): Promise<void> => {
    const c = child;
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((done) => {
      c.once('exit', () => done());
      c.kill('SIGKILL');
    });
  };
  process.on('exit', () => child?.kill('SIGKILL'));
  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop,
    restart: launch,
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
  };
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((done) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.destroy();
      done(true);
    });
    s.on('error', () => done(false));
  });
}

export function redisAvailable(): boolean {
  return REDIS_SERVER !== undefined;
}
