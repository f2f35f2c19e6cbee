/**
 * Issue 7, scenario 6: the state file cannot be written (read-only filesystem, full filesystem,
 * a path under a regular file). Routing goes on, the failure is logged once per distinct error,
 * /readyz reports `degraded`, and the file on disk is never torn: it is always the previous
 * complete document. Filesystem faults use small tmpfs mounts, so these tests need root (they
 * are skipped otherwise, except the path-under-a-file case).
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, ftruncateSync, fstatSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSim, simRequest, stopAllSims } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, writeTempConfig, type TestRouter } from '../support/router.js';
import { freePortRange, MAIN_ENTRY } from '../support/router-process.js';
import { simHost } from '../support/fleet.js';
import { recordedPins } from '../support/state-file.js';
import { StateService } from '../../src/modules/state/state.service.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

const ENV = { ROUTER_ADMIN_TOKEN: TEST_TOKEN };
const mounts: string[] = [];

/** Mounts a fresh tmpfs with `options` on a new directory; undefined when that is not possible here. */
function tmpfs(options: string): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'ar-tmpfs-'));
  if (spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir]).status !== 0) return undefined;
  mounts.push(dir);
  return dir;
}

/** Fills the filesystem of `dir` until ENOSPC, then frees `leave` bytes. Returns the filler path. */
function fill(dir: string, leave = 0): string {
  const path = join(dir, 'filler');
  const fd = openSync(path, 'w');
  try {
    for (;;) writeSync(fd, Buffer.alloc(4096));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  }
  if (leave > 0) ftruncateSync(fd, Math.max(0, fstatSync(fd).size - leave));
  closeSync(fd);
  return path;
}

const post = (router: TestRouter, session: string) =>
  simRequest(`${router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'x-session-id': session },
    body: Buffer.from('{"model":"sim-model","messages":[{"role":"user","content":"x"}],"max_tokens":1}'),
  });
const readyz = async (router: TestRouter) => {
  const r = await simRequest(`${router.url}/readyz`);
  return { status: r.status, body: JSON.parse(r.body.toString()) as { status: string; degraded?: Record<string, string> } };
};
const failures = (router: TestRouter) => router.logs().filter((l) => l['event'] === 'state_write_failed');
const leftovers = (dir: string) => readdirSync(dir).filter((f) => f.endsWith('.tmp'));

/** One more attempt to write the state file, awaited (a write that starts after the call). */
const writeAttempt = (router: TestRouter): Promise<void> => router.app.get(StateService).write();

/** A router owning one launched simulator, its state file at `path`. */
async function routerWithReplica(path: string): Promise<TestRouter> {
  const base = await freePortRange(1);
  const router = await startTestRouter({ hosts: [simHost('w', [0], base)] }, ['--initial-replicas', '1', '--state-file', path], ENV);
  await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas[0]?.ready, 15_000, 'the replica to be ready');
  return router;
}

/** Sends `n` requests with new session ids (each a pin change the state file must record). */
async function newSessions(router: TestRouter, prefix: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) assert.equal((await post(router, `${prefix}-${i}`)).status, 200, 'routing goes on');
}

describe('state file write failures (issue 7 §6)', () => {
  const routers: TestRouter[] = [];
  after(async () => {
    for (const r of routers) await r.close().catch(() => undefined);
    await stopAllSims();
    for (const m of mounts) if (spawnSync('umount', ['-l', m]).status === 0) rmSync(m, { recursive: true, force: true });
  });

  it('on a read-only filesystem: routes, logs the failure once, /readyz shows degraded, the old file stays as it was', async (t) => {
    const dir = tmpfs('size=1m');
    if (dir === undefined) return t.skip('needs root and tmpfs mounts');
    const path = join(dir, 'state.json');
    const previous = JSON.stringify({ version: 1, epoch: 4, replicas: [], sessions: [] });
    writeFileSync(path, previous);
    assert.equal(spawnSync('mount', ['-o', 'remount,ro', dir]).status, 0);
    const sim = await spawnSim({ name: 'ro' });
    const router = await startTestRouter({ replicas: [{ name: 'ro', host: '127.0.0.1', port: sim.port }] }, ['--state-file', path], ENV);
    routers.push(router);
    // the 1 s pin flush tries first; then three more attempts, each after new pins, fail the same way
    await newSessions(router, 'ro-first', 1);
    await waitFor(() => failures(router).length > 0, 5_000, 'the pin flush to fail');
    for (let i = 0; i < 3; i++) {
      await newSessions(router, `ro-${i}`, 1);
      await writeAttempt(router);
    }
    const lines = failures(router);
    assert.equal(lines.length, 1, `logged once, not per attempt: ${JSON.stringify(lines)}`);
    assert.match(String(lines[0]['msg']), /state\.json.*(EROFS|read-only)/);
    const rz = await readyz(router);
    assert.equal(rz.status, 200, 'still ready: routing does not depend on the file');
    assert.match(rz.body.degraded?.['state_file'] ?? '', /EROFS|read-only/);
    assert.equal(readFileSync(path, 'utf8'), previous, 'the previous file is untouched');
  });

  it('on a full filesystem: routes, logs once, never tears the file, and recovers when space returns', async (t) => {
    const dir = tmpfs('size=64k');
    if (dir === undefined) return t.skip('needs root and tmpfs mounts');
    const path = join(dir, 'state.json');
    const router = await routerWithReplica(path);
    routers.push(router);
    await newSessions(router, 'early', 10);
    await waitFor(() => recordedPins(path).length === 10, 10_000, 'the pins written');
    const before = readFileSync(path, 'utf8');
    const filler = fill(dir);
    for (let i = 0; i < 10; i++) {
      await newSessions(router, `full-${i}`, 2);
      await writeAttempt(router);
      assert.equal(readFileSync(path, 'utf8'), before, 'the previous complete file stays in place');
    }
    const lines = failures(router);
    assert.equal(lines.length, 1, `logged once per distinct error: ${lines.map((l) => String(l['msg'])).join(' | ')}`);
    assert.match(String(lines[0]['msg']), /ENOSPC|no space/i);
    assert.deepEqual(leftovers(dir), [], 'no temporary file left behind');
    const rz = await readyz(router);
    assert.equal(rz.status, 200);
    assert.match(rz.body.degraded?.['state_file'] ?? '', /ENOSPC|no space/i);

    rmSync(filler);
    await router.waitForLog((l) => l['event'] === 'state_write_recovered', 5_000);
    const now = JSON.parse(readFileSync(path, 'utf8')) as { replicas: Array<{ slot: string }>; sessions: unknown[] };
    assert.deepEqual(
      now.replicas.map((r) => r.slot),
      ['w-d0'],
    );
    assert.equal(now.sessions.length, 30);
    assert.equal((await readyz(router)).body.degraded, undefined, 'degraded cleared');
  });

  it('on a nearly full filesystem (a short write) never renames a truncated file over the good one', async (t) => {
    const dir = tmpfs('size=64k');
    if (dir === undefined) return t.skip('needs root and tmpfs mounts');
    const path = join(dir, 'state.json');
    const router = await routerWithReplica(path);
    routers.push(router);
    await newSessions(router, 'small', 20);
    await waitFor(() => recordedPins(path).length === 20, 10_000, 'the pins written');
    assert.ok(readFileSync(path).length < 4096, 'the first file fits in one page');
    fill(dir, 4096); // one page left: the next, larger file gets a short write
    await newSessions(router, 'grow', 120);
    // the write of all 140 pins does not fit: it fails part-way, and the file is still a whole one
    await writeAttempt(router);
    const text = readFileSync(path, 'utf8');
    assert.doesNotThrow(() => JSON.parse(text), `torn state file (${text.length} bytes): ...${text.slice(-80)}`);
    assert.deepEqual(leftovers(dir), [], 'no temporary file left behind');
    assert.equal(failures(router).length, 1, 'the failed write is logged');
  });

  it('a state file under a regular file (ENOTDIR) is a start-up error naming the path (exit 2), and with --discard-state it routes degraded', async () => {
    const sim = await spawnSim({ name: 'nd' });
    const cfg = writeTempConfig({ replicas: [{ name: 'nd', host: '127.0.0.1', port: sim.port }] });
    const file = join(tempDir('ar-notdir-'), 'plain-file');
    writeFileSync(file, 'not a directory');
    const path = join(file, 'state.json');
    const run = spawn(process.execPath, [MAIN_ENTRY, '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--state-file', path], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    run.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((r) => run.on('exit', (c) => r(c)));
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^error: --state-file: cannot read .*plain-file\/state\.json: ENOTDIR/m);

    const router = await startTestRouter({ replicas: [{ name: 'nd', host: '127.0.0.1', port: sim.port }] }, ['--state-file', path, '--discard-state'], ENV);
    routers.push(router);
    await newSessions(router, 'nd', 5);
    await waitFor(() => failures(router).length === 1, 10_000, 'the write failure logged');
    const rz = await readyz(router);
    assert.equal(rz.status, 200);
    assert.match(rz.body.degraded?.['state_file'] ?? '', /ENOTDIR|EEXIST|not a directory/i);
  });
});
