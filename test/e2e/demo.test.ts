/**
 * `npm start` (contract §1, issue 3 item 8): the demo runs the router with config/demo.json, launches
 * simulator processes through the local transport, prints the URL and the admin token, answers a
 * chat request from a simulator, and on Ctrl-C exits leaving no simulator behind.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { simRequest } from '../support/sim-process.js';
import { adminCall, waitFor } from '../support/router.js';
import { pidAlive } from '../support/router-process.js';

/** The compiled demo next to this test's compiled tree (dist-test/src/demo.js). */
const DEMO_ENTRY = resolve(dirname(fileURLToPath(import.meta.url)), '../../src/demo.js');
/** The repository: where config/demo.json lives and the demo's replica command resolves. */
const REPO = (() => {
  for (let dir = dirname(DEMO_ENTRY); dirname(dir) !== dir; dir = dirname(dir)) {
    if (existsSync(join(dir, 'config', 'demo.json'))) return dir;
  }
  throw new Error(`no config/demo.json above ${DEMO_ENTRY}`);
})();
/** config/demo.json: slots demo-d0..d1 (sim-model) on 18001 + device, coder-d0..d1 (sim-coder) on 18011 + device. */
const DEMO_SLOT_PORTS = [18001, 18011];

/** Resolves with a port free on `host` a moment ago, or undefined when `host` cannot be bound. */
function freePortOn(host: string): Promise<number | undefined> {
  return new Promise((done) => {
    const s = createServer();
    s.once('error', () => done(undefined));
    s.listen(0, host, () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => done(port));
    });
  });
}

function portFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const s = createServer();
    s.once('error', () => done(false));
    s.listen(port, '127.0.0.1', () => s.close(() => done(true)));
  });
}

/** Entries of the repository root and of config/ (where a stray state file would land). */
function repoEntries(): Set<string> {
  return new Set([...readdirSync(REPO), ...readdirSync(join(REPO, 'config')).map((f) => `config/${f}`)]);
}

describe('npm start: the demo', () => {
  let demo: ChildProcess | undefined;
  const pids: number[] = [];
  after(async () => {
    // A test that failed half-way: stop the demo the way a user would (Ctrl-C stops what it
    // launched; SIGKILL would leave its detached replicas behind), then kill what is left.
    const d = demo;
    if (d && d.exitCode === null && d.signalCode === null) {
      const gone = new Promise<void>((done) => d.once('exit', () => done()));
      d.kill('SIGINT');
      const timer = setTimeout(() => d.kill('SIGKILL'), 10_000);
      await gone;
      clearTimeout(timer);
    }
    for (const pid of pids) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });

  it('prints the URL of a --host/--port= override, answers a chat from a simulator, and on SIGINT exits leaving no simulator alive', async (t) => {
    // The demo's replica command is `node dist/sim/replica.js` in the repository (built by npm install).
    assert.ok(existsSync(join(REPO, 'dist', 'sim', 'replica.js')), `${REPO}/dist/sim/replica.js is not built (npm run build)`);
    for (const p of DEMO_SLOT_PORTS) assert.ok(await portFree(p), `port ${p} (a demo slot of config/demo.json) is in use`);
    // A loopback address other than the demo's default 127.0.0.1, so a banner that ignores --host
    // prints a URL nothing listens on. Linux routes all of 127/8 to lo; elsewhere fall back.
    let host = '127.0.0.2';
    let port = await freePortOn(host);
    if (port === undefined) {
      t.diagnostic('127.0.0.2 cannot be bound here: testing the --host override with 127.0.0.1');
      host = '127.0.0.1';
      port = (await freePortOn(host))!;
    }
    const before = repoEntries();
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('ROUTER_') && v !== undefined) env[k] = v;
    const started = performance.now();
    const child = spawn(process.execPath, [DEMO_ENTRY, `--host=${host}`, `--port=${port}`], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    demo = child;
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.once('exit', (code, signal) => done({ code, signal })));
    const why = (): string => `\nstdout:\n${out.slice(-3000)}\nstderr:\n${err.slice(-3000)}`;

    const banner = await waitFor(
      () => /^\s*router\s+(\S+)\s+admin token: (\S+)$/m.exec(out) ?? (child.exitCode !== null ? 'exited' : undefined),
      10_000,
      `the demo banner${why()}`,
    );
    assert.notEqual(banner, 'exited', `the demo exited before printing its URL${why()}`);
    const [, url, token] = banner as RegExpExecArray;
    assert.equal(url, `http://${host}:${port}`, 'printed URL');
    assert.match(token, /^[0-9a-f]{24}$/);

    // A chat request to the printed URL, answered by a simulator the demo launched (503 until one
    // has loaded and passed a health poll).
    const chat = Buffer.from(JSON.stringify({ model: 'sim-model', session_id: 'demo-1', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }));
    const r = await waitFor(
      async () => {
        const res = await simRequest(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat }).catch(
          () => undefined,
        );
        return res?.status === 200 ? res : undefined;
      },
      15_000,
      `a 200 from the demo${why()}`,
    );
    assert.match(String(r.headers['x-router-replica']), /^demo-d[01]$/);
    assert.equal(r.headers['x-replica-name'], r.headers['x-router-replica'], 'answered by the simulator the router named');
    assert.equal((JSON.parse(r.body.toString()) as { object: string }).object, 'chat.completion');
    // The second model, and its LoRA adapter, served by the coder replica (contract §4.3).
    for (const model of ['sim-coder', 'sim-coder-sql']) {
      const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'write a loop' }], max_tokens: 4 });
      const c = await waitFor(
        async () => {
          const res = await simRequest(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).catch(
            () => undefined,
          );
          return res?.status === 200 ? res : undefined;
        },
        15_000,
        `a 200 for ${model} from the demo${why()}`,
      );
      assert.equal(c.headers['x-replica-name'], 'coder-d0', model);
      assert.equal((JSON.parse(c.body.toString()) as { model: string }).model, model);
    }

    // The launched simulators, from the admin API with the printed token.
    const list = await adminCall({ url: url }, 'GET', '/replicas', { token: token });
    assert.equal(list.status, 200);
    const launched = (list.body.replicas as Array<{ name: string; pid: number | null; kind: string }>).filter((x) => x.kind === 'launched');
    assert.deepEqual(launched.map((x) => x.name).sort(), ['coder-d0', 'demo-d0']);
    for (const x of launched) {
      assert.equal(typeof x.pid, 'number', `${x.name} pid`);
      pids.push(x.pid!);
      assert.ok(pidAlive(x.pid!), `${x.name} (pid ${x.pid}) runs`);
    }

    // Ctrl-C: the demo drains, stops what it launched and exits 0.
    child.kill('SIGINT');
    let timer: ReturnType<typeof setTimeout> | undefined;
    const exit = await Promise.race([exited, new Promise<undefined>((done) => (timer = setTimeout(() => done(undefined), 15_000)))]);
    clearTimeout(timer);
    assert.ok(exit, `the demo did not exit within 15 s of SIGINT${why()}`);
    assert.deepEqual(exit, { code: 0, signal: null }, why());
    for (const pid of pids) {
      await waitFor(() => !pidAlive(pid), 5_000, `simulator pid ${pid} to be gone after the demo exited`);
      // Nor anything else of its process group (the local transport starts each in its own).
      assert.throws(() => process.kill(-pid, 0), { code: 'ESRCH' }, `process group ${pid} still has a member`);
    }
    // Nothing written into the repository (the demo has no state file; replica logs go to /tmp).
    const added = [...repoEntries()].filter((e) => !before.has(e) && !/^\.[\w-]*dist/.test(e));
    assert.deepEqual(added, [], 'files the demo created in the repository');
    t.diagnostic(`demo round trip took ${Math.round(performance.now() - started)} ms`);
  });
});
