/**
 * nginx as the reference proxy: a generated config in a temp prefix (one worker, to be fair to
 * one Node process; upstream keepalive; no buffering either way; no access log), run in the
 * foreground as a child and stopped after the scenario.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../test/support/sim-process.js';
import { answers, stopChild, track, waitUntil } from './processes.js';
import type { BenchContext } from './scenario.js';

/** A running reverse proxy in front of the simulators. */
export interface ProxyProcess {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/** The nginx settings the report states (kept in one place so the report cannot drift). */
export const NGINX_SETTINGS =
  'worker_processes 1; upstream keepalive 64 (keepalive_requests 100000); proxy_http_version 1.1; ' +
  'proxy_set_header Connection ""; proxy_buffering off; proxy_request_buffering off; access_log off';

let seq = 0;

/** The nginx.conf text for `upstreamPorts`, listening on 127.0.0.1:`port`, temp files under `dir`. */
export function nginxConfig(dir: string, port: number, upstreamPorts: readonly number[]): string {
  const servers = upstreamPorts.map((p) => `    server 127.0.0.1:${p};`).join('\n');
  return `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 100000;
  upstream sims {
${servers}
    keepalive 64;
    keepalive_requests 100000;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://sims;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 3600s;
    }
  }
}
`;
}

/**
 * Starts `nginx -p <dir> -c <conf> -g 'daemon off;'` in front of `upstreamPorts` and resolves once
 * `GET /health` through it answers 200.
 */
export async function startNginx(ctx: BenchContext, nginxPath: string, upstreamPorts: readonly number[]): Promise<ProxyProcess> {
  const dir = join(ctx.tmpDir, `nginx-${++seq}`);
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, nginxConfig(dir, port, upstreamPorts));
  const child = spawn(nginxPath, ['-p', dir, '-e', join(dir, 'error.log'), '-c', conf, '-g', 'daemon off;'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child);
  let out = '';
  child.stdout?.on('data', (b: Buffer) => (out += b.toString('utf8')));
  child.stderr?.on('data', (b: Buffer) => (out += b.toString('utf8')));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntil(
      async () => {
        if (child.exitCode !== null) throw new Error(`nginx exited (${child.exitCode}) at start: ${out.slice(-2000)}`);
        return answers(`${url}/health`);
      },
      10_000,
      `nginx on ${url} to proxy /health`,
    );
  } catch (e: unknown) {
    await stopChild(child, 2_000);
    throw e;
  }
  // nginx stops fast on SIGQUIT (graceful) or SIGTERM (fast); SIGTERM is enough here.
  return { url, pid: child.pid ?? -1, stop: () => stopChild(child, 5_000) };
}
