import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { startRouter } from '../../src/app.factory.js';
import { loadRouterConfig } from '../../src/config/config.loader.js';
import type { RouterConfig } from '../../src/config/router-config.js';
import { RegistryService } from '../../src/modules/registry/registry.service.js';
import { after, before } from 'node:test';
import { simRequest, spawnSim, stopAllSims } from './sim-process.js';
import { collectLogLines } from './log-lines.js';
import { ShutdownService } from '../../src/modules/lifecycle/shutdown.service.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

/** A router booted in this process (real AppModule on Fastify, real sockets). */
export interface TestRouter {
  readonly url: string;
  readonly app: NestFastifyApplication;
  readonly config: RouterConfig;
  /** Every log line so far, parsed. */
  logs(): Array<Record<string, unknown>>;
  /** Resolves with the first log line matching, polling until `timeoutMs`. */
  waitForLog(pred: (l: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Outstanding count of a replica, read from the registry. */
  outstanding(name: string): number;
  close(): Promise<void>;
}

export function writeTempConfig(config: unknown, name = 'config.json'): string {
  const dir = tempDir('ar-test-');
  const p = join(dir, name);
  writeFileSync(p, typeof config === 'string' ? config : JSON.stringify(config, null, 2));
  return p;
}

/**
 * Loads `config` through the real loader (flags as a user would give them) and starts the app on
 * an ephemeral loopback port. Fast health polling by default so tests do not wait.
 */
export async function startTestRouter(config: unknown, flags: string[] = [], env: Record<string, string> = {}): Promise<TestRouter> {
  const file = writeTempConfig(config);
  const argv = ['--config', file, '--host', '127.0.0.1', '--port', '0', '--health-interval', '0.2', '--health-timeout', '1', '--log-level', 'info', ...flags];
  const cfg = loadRouterConfig(argv, env);
  const stream = new PassThrough();
  const lines = collectLogLines(stream);
  const { app, url } = await startRouter(cfg, { logStream: stream, env: { ...process.env, ...env } });
  const registry = app.get(RegistryService);
  return {
    url,
    app,
    config: cfg,
    logs: () => lines,
    waitForLog: (pred, timeoutMs = 5_000) => waitFor(() => lines.find(pred), timeoutMs, 'log line'),
    outstanding: (name) => registry.get(name)?.outstanding ?? NaN,
    // The same graceful shutdown as SIGTERM: drains, stops every launched replica, closes the app.
    close: () => app.get(ShutdownService).run(app),
  };
}

/**
 * Polls `probe` until it returns a value other than undefined/false, or throws after `timeoutMs`.
 * `what` names the condition in that error; as a function it is called then, to describe what was seen.
 */
export async function waitFor<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 5_000,
  what: string | (() => string) = 'condition',
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** An admin API call with the bearer token; JSON in, parsed JSON out. */
export async function adminCall(
  router: { url: string },
  method: string,
  path: string,
  opts: { token?: string | null; body?: unknown } = {},
  // The body is whatever JSON the API answered; tests assert its shape field by field.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: any }> {
  const headers: Record<string, string> = {};
  const token = opts.token === undefined ? TEST_TOKEN : opts.token;
  if (token !== null) headers['authorization'] = `Bearer ${token}`;
  let data: Buffer | undefined;
  if (opts.body !== undefined) {
    data = Buffer.from(typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body));
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(data.length);
  }
  const r = await simRequest(`${router.url}${path}`, { method, headers, body: data, timeoutMs: 60_000 });
  const text = r.body.toString();
  let body: unknown = text;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: r.status, headers: r.headers, body };
}

export const TEST_TOKEN = 'test-admin-token';

/**
 * The admin tests' pair of routers in front of one simulator `a0`: `open` has the admin token
 * configured (TEST_TOKEN), `closed` has none (every admin route fails closed). Registers the
 * node:test before/after hooks of the enclosing describe and returns live getters.
 */
export function adminRouterPair(): { readonly open: TestRouter; readonly closed: TestRouter } {
  let open: TestRouter | undefined;
  let closed: TestRouter | undefined;
  before(async () => {
    const sim = await spawnSim({ name: 'a0' });
    const replicas = [{ name: 'a0', host: '127.0.0.1', port: sim.port }];
    open = await startTestRouter({ replicas }, [], { ROUTER_ADMIN_TOKEN: TEST_TOKEN });
    closed = await startTestRouter({ replicas });
  });
  after(async () => {
    await open?.close();
    await closed?.close();
    await stopAllSims();
  });
  return {
    get open() {
      return open!;
    },
    get closed() {
      return closed!;
    },
  };
}
