import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, realpath, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { LaunchError, type LaunchSpec } from '../launcher.transport.js';
import { LocalTransport } from './local.transport.js';
import { killQuietly, listenerInGroup, processGone, replicaArgv, replicaTempDir, testSlot, waitFor, waitForReport, within } from './replica-process.fake.js';
import { testHost } from '../../../config/test-host.fake.js';

const host = testHost();
const slot = testSlot(host);
const baseEnv = { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin' };

function spec(argv: string[], logPath: string, extra: Partial<LaunchSpec> = {}): LaunchSpec {
  return { slot, host, argv, env: baseEnv, logPath, ...extra };
}

describe('LocalTransport', () => {
  it('launches a detached process with the given argv, env and workdir, appending stdout+stderr to the log', async (t) => {
    const dir = replicaTempDir(t, 'local-transport-');
    const workdir = join(dir, 'work dir');
    await mkdir(workdir);
    const logPath = join(dir, 'logs', 'nested', 'node-d0.log');
    await mkdir(join(dir, 'logs', 'nested'), { recursive: true });
    await writeFile(logPath, 'line from a previous run\n');
    process.env.ROUTER_LAUNCHER_TEST_SECRET = 'must-not-leak';
    t.after(() => delete process.env.ROUTER_LAUNCHER_TEST_SECRET);

    const transport = new LocalTransport();
    const launched = await transport.launch(
      spec(replicaArgv(['--model', 'a b', "it's"]), logPath, { env: { ...baseEnv, LAUNCHER_TEST_FOO: 'bar baz' }, workdir }),
    );
    t.after(() => killQuietly(launched.pid));

    const report = await waitForReport(logPath);
    assert.equal(report.pid, launched.pid);
    assert.deepEqual(report.argv, ['--model', 'a b', "it's"]);
    assert.equal(report.cwd, await realpath(workdir));
    assert.equal(report.foo, 'bar baz');
    assert.deepEqual(report.router, []);
    const log = await waitFor('the stderr line in the log', async () => {
      const text = await readFile(logPath, 'utf8');
      return text.includes(`STDERR-LINE from ${launched.pid}`) ? text : undefined;
    });
    assert.ok(log.startsWith('line from a previous run\n'), 'the log is appended to, not truncated');
    assert.equal(await transport.isAlive(launched.pid), true);

    assert.ok(launched.exited !== undefined);
    process.kill(launched.pid, 'SIGKILL');
    assert.deepEqual(await within('the child exit', launched.exited), { code: null, signal: 'SIGKILL' });
    assert.equal(await transport.isAlive(launched.pid), false);
  });

  it('creates a missing log directory', async (t) => {
    const dir = replicaTempDir(t, 'local-transport-');
    const logPath = join(dir, 'a', 'b', 'c.log');
    const launched = await new LocalTransport().launch(spec(replicaArgv(), logPath));
    t.after(() => killQuietly(launched.pid));
    assert.equal((await waitForReport(logPath)).pid, launched.pid);
  });

  it('stop without stop_command SIGTERMs the whole process group, grandchild included', async (t) => {
    const dir = replicaTempDir(t, 'local-transport-');
    const logPath = join(dir, 'r.log');
    const transport = new LocalTransport();
    const launched = await transport.launch(spec(replicaArgv(['--grandchild']), logPath));
    const report = await waitForReport(logPath);
    const grandchild = report.grandchild;
    assert.ok(grandchild !== undefined && grandchild > 1);
    t.after(() => killQuietly(launched.pid, grandchild));
    assert.equal(processGone(grandchild), false);

    const started = Date.now();
    await transport.stop({ pid: launched.pid, env: baseEnv, killAfterMs: 10_000 });
    assert.ok(Date.now() - started < 5_000, 'SIGTERM alone was enough; no wait for the SIGKILL deadline');
    assert.deepEqual(await within('the child exit', launched.exited), { code: null, signal: 'SIGTERM' });
    await waitFor('the grandchild to be gone', () => processGone(grandchild), 5_000);
    assert.equal(await transport.isAlive(launched.pid), false);
  });

  it('stop escalates to SIGKILL for a process that ignores SIGTERM', async (t) => {
    const dir = replicaTempDir(t, 'local-transport-');
    const logPath = join(dir, 'r.log');
    const transport = new LocalTransport();
    const launched = await transport.launch(spec(replicaArgv(['--ignore-term']), logPath));
    t.after(() => killQuietly(launched.pid));
    await waitForReport(logPath); // its SIGTERM handler is installed

    await transport.stop({ pid: launched.pid, env: baseEnv, killAfterMs: 300 });
    assert.deepEqual(await within('the child exit', launched.exited), { code: null, signal: 'SIGKILL' });
    assert.match(await readFile(logPath, 'utf8'), /ignored SIGTERM/, 'SIGTERM was sent first');
    assert.equal(await transport.isAlive(launched.pid), false);
  });

  it('stop of a pid that is already gone resolves', async (t) => {
    const dir = replicaTempDir(t, 'local-transport-');
    const transport = new LocalTransport();
    const launched = await transport.launch(spec(replicaArgv(), join(dir, 'r.log')));
    process.kill(launched.pid, 'SIGKILL');
    await within('the child exit', launched.exited);
    await transport.stop({ pid: launched.pid, env: baseEnv, killAfterMs: 100 });
  });

  it('stop with a `pkill -f <marker>` stop_command stops the replica and reports success', async (t) => {
    const dir = replicaTempDir(t, 'local-transport-');
    const logPath = join(dir, 'r.log');
    const marker = `launcher-test-marker-${randomBytes(6).toString('hex')}`;
    const transport = new LocalTransport();
    const launched = await transport.launch(spec(replicaArgv([`--tag=${marker}`]), logPath));
    t.after(() => killQuietly(launched.pid));
    await waitForReport(logPath);

    await transport.stop({ pid: launched.pid, stopArgv: ['pkill', '-f', marker], env: baseEnv, workdir: dir, killAfterMs: 10_000 });
    assert.deepEqual(await within('the child exit', launched.exited), { code: null, signal: 'SIGTERM' });
  });

  it('stop reports a failing stop_command as stop_failed with its exit code and output', async (t) => {
    const dir = replicaTempDir(t, 'local-transport-');
    const transport = new LocalTransport();
    const failing = transport.stop({
      pid: null,
      stopArgv: ['/bin/sh', '-c', 'echo boom-on-stderr >&2; exit 3'],
      env: baseEnv,
      workdir: dir,
      killAfterMs: 1_000,
    });
    await assert.rejects(failing, (err: unknown) => {
      assert.ok(err instanceof LaunchError);
      assert.equal(err.code, 'stop_failed');
      assert.match(err.message, /exited with code 3/);
      assert.match(err.message, /boom-on-stderr/);
      return true;
    });
    await assert.rejects(
      transport.stop({ pid: null, stopArgv: ['pkill', '-f', `no-such-process-${randomBytes(8).toString('hex')}`], env: baseEnv, killAfterMs: 1_000 }),
      (err: unknown) => err instanceof LaunchError && err.code === 'stop_failed' && /exited with code 1/.test(err.message),
    );
  });

  it('bounds a hanging stop_command', async () => {
    const transport = new LocalTransport({ stopCommandTimeoutMs: 200 });
    await assert.rejects(
      transport.stop({ pid: null, stopArgv: ['sleep', '30'], env: baseEnv, killAfterMs: 1_000 }),
      (err: unknown) => err instanceof LaunchError && err.code === 'stop_failed' && /did not finish within 200 ms/.test(err.message),
    );
  });

  it('refuses to stop without a pid or stop_command, and never signals pid 0/1', async () => {
    const transport = new LocalTransport();
    for (const pid of [null, 0, 1, -5, process.pid]) {
      await assert.rejects(transport.stop({ pid, env: baseEnv, killAfterMs: 100 }), (err: unknown) => err instanceof LaunchError && err.code === 'stop_failed');
    }
  });

  it('rejects a missing program with spawn_failed naming it', async (t) => {
    const dir = replicaTempDir(t, 'local-transport-');
    const program = join(dir, 'no-such-engine');
    await assert.rejects(new LocalTransport().launch(spec([program, '--port', '1'], join(dir, 'r.log'))), (err: unknown) => {
      assert.ok(err instanceof LaunchError);
      assert.equal(err.code, 'spawn_failed');
      assert.ok(err.message.includes(program), err.message);
      return true;
    });
  });

  it('rejects a missing workdir with spawn_failed and an unwritable log with log_unwritable', async (t) => {
    const dir = replicaTempDir(t, 'local-transport-');
    const transport = new LocalTransport();
    await assert.rejects(
      transport.launch(spec(replicaArgv(), join(dir, 'r.log'), { workdir: join(dir, 'missing') })),
      (err: unknown) => err instanceof LaunchError && err.code === 'spawn_failed' && err.message.includes('missing'),
    );
    const file = join(dir, 'plain-file');
    await writeFile(file, 'x');
    await assert.rejects(
      transport.launch(spec(replicaArgv(), join(file, 'sub', 'r.log'))),
      (err: unknown) => err instanceof LaunchError && err.code === 'log_unwritable' && err.message.includes(file),
    );
  });

  it('tailLog returns the last N lines of a big file', async (t) => {
    const dir = replicaTempDir(t, 'local-transport-');
    const path = join(dir, 'big.log');
    const lines = Array.from({ length: 200_000 }, (_, i) => `line ${i} ${'x'.repeat(i % 50)}`);
    await writeFile(path, `${lines.join('\n')}\n`);
    const transport = new LocalTransport();
    assert.deepEqual(await transport.tailLog(path, 20), lines.slice(-20));
    assert.deepEqual(await transport.tailLog(path, 5000), lines.slice(-5000));
    assert.deepEqual(await transport.tailLog(path, 1), lines.slice(-1));
    assert.deepEqual(await transport.tailLog(path, 0), []);

    const small = join(dir, 'small.log');
    await writeFile(small, 'a\nb\nc'); // no trailing newline
    assert.deepEqual(await transport.tailLog(small, 2), ['b', 'c']);
    assert.deepEqual(await transport.tailLog(small, 10), ['a', 'b', 'c']);
    assert.deepEqual(await transport.tailLog(join(dir, 'absent.log'), 10), []);
  });

  it('identify proves a pid only when it, or a member of its group, holds the socket listening on the port', async (t) => {
    const group = await listenerInGroup(t);
    const transport = new LocalTransport();
    assert.deepEqual(await transport.identify(group.leader, group.port), { proven: true }, 'the group leader of a wrapped listener');
    assert.deepEqual(await transport.identify(group.listener, group.port), { proven: true }, 'the listener itself');
    const sleeper = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    t.after(() => killQuietly(sleeper.pid));
    const other = await transport.identify(sleeper.pid!, group.port);
    assert.equal(other.proven, false);
    assert.match(
      other.proven ? '' : other.reason,
      new RegExp(`neither pid ${sleeper.pid} nor its process group holds the socket listening on port ${group.port}`),
    );
    const none = await transport.identify(group.leader, group.closedPort);
    assert.match(none.proven ? '' : none.reason, new RegExp(`no socket listens on port ${group.closedPort}`));
    const done = spawn('true', [], { stdio: 'ignore' });
    await new Promise((r) => done.once('exit', r));
    const dead = await transport.identify(done.pid!, group.port);
    assert.match(dead.proven ? '' : dead.reason, new RegExp(`pid ${done.pid} is not alive`));
    for (const pid of [0, 1, process.pid]) assert.equal((await transport.identify(pid, group.port)).proven, false, `pid ${pid}`);
  });
});
