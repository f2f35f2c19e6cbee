/**
 * Extra reference rows of scenario (a), besides nginx: haproxy (when installed; one thread,
 * keep-alive both sides, no logging) and the plainest Node pipe proxy (node-proxy.ts), the
 * ceiling of one Node process on this machine.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/support/sim-process.js';
import type { ProxyProcess } from './nginx.js';
import { answers, stopChild, track, waitUntil } from './processes.js';
import type { BenchContext } from './scenario.js';

/** Compiled plain Node proxy (`dist-test/bench/node-proxy.js`). */
export const NODE_PROXY = resolve(dirname(fileURLToPath(import.meta.url)), 'node-proxy.js');

/** The haproxy settings the report states. */
export const HAPROXY_SETTINGS = 'nbthread 1; mode http; keep-alive to clients and servers (http-reuse always); balance roundrobin; no logging';

let seq = 0;

/**
 * haproxy.cfg for `upstreamPorts`, listening on 127.0.0.1:`port`. `streaming` adds
 * `option http-no-delay`: without it haproxy holds small response chunks back and delivers a
 * 50 ms-paced event stream in bunches (measured: first byte +210 ms, gaps of 0 and 264 ms).
 */
export function haproxyConfig(port: number, upstreamPorts: readonly number[], streaming = false): string {
  const servers = upstreamPorts.map((p, i) => `  server s${i} 127.0.0.1:${p}`).join('\n');
  return `global
  nbthread 1
  maxconn 8000
defaults
  mode http
  timeout connect 5s
  timeout client 3600s
  timeout server 3600s
  http-reuse always
${streaming ? '  option http-no-delay\n' : ''}frontend bench
  bind 127.0.0.1:${port}
  default_backend sims
backend sims
  balance roundrobin
${servers}
`;
}

async function startChild(what: string, cmd: string, args: string[], url: string, env: Record<string, string> = {}): Promise<ProxyProcess> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  track(child);
  let out = '';
  child.stdout?.on('data', (b: Buffer) => (out = (out + b.toString('utf8')).slice(-8192)));
  child.stderr?.on('data', (b: Buffer) => (out = (out + b.toString('utf8')).slice(-8192)));
  try {
    await waitUntil(
      async () => {
        if (child.exitCode !== null) throw new Error(`${what} exited (${child.exitCode}) at start: ${out}`);
        return answers(`${url}/health`);
      },
      10_000,
      `${what} on ${url} to proxy /health`,
    );
  } catch (e: unknown) {
    await stopChild(child, 2_000);
    throw e;
  }
  return { url, pid: child.pid ?? -1, stop: () => stopChild(child, 5_000) };
}

/** Starts `haproxy -db -f <cfg>` in front of `upstreamPorts` (`streaming`: see haproxyConfig). */
export async function startHaproxy(ctx: BenchContext, haproxyPath: string, upstreamPorts: readonly number[], streaming = false): Promise<ProxyProcess> {
  const dir = join(ctx.tmpDir, `haproxy-${++seq}`);
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const cfg = join(dir, 'haproxy.cfg');
  writeFileSync(cfg, haproxyConfig(port, upstreamPorts, streaming));
  return startChild('haproxy', haproxyPath, ['-db', '-f', cfg], `http://127.0.0.1:${port}`);
}

/**
 * Starts the plain Node pipe proxy in front of `upstreamPorts` (`nodeArgs` before the script, e.g.
 * profiling; `env` e.g. `NODE_PROXY_MAX_SOCKETS`).
 */
export async function startNodeProxy(
  upstreamPorts: readonly number[],
  nodeArgs: readonly string[] = [],
  env: Record<string, string> = {},
): Promise<ProxyProcess> {
  const port = await freePort();
  return startChild(
    'the plain node proxy',
    process.execPath,
    [...nodeArgs, NODE_PROXY, String(port), ...upstreamPorts.map(String)],
    `http://127.0.0.1:${port}`,
    env,
  );
}
