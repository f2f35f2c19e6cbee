import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, realpath, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';

import type { HostSpec } from '../../../config/router-config.js';
import { LaunchError } from '../launcher.transport.js';
import { killQuietly, parseReport, processGone, replicaArgv, replicaTempDir, testSlot, waitFor, type ReplicaReport } from './replica-process.fake.js';
import { parseSshDestination } from './ssh-connection.js';
import { ed25519KeyPair } from './ssh-keys.fake.js';
import { startSshServer, type TestSshServer } from './ssh-server.fake.js';
import { SshTransport, type SshTransportOptions } from './ssh.transport.js';
import { testHost } from '../../../config/test-host.fake.js';

const user = userInfo().username;

function hostFor(server: TestSshServer, overrides: Partial<HostSpec> = {}): HostSpec {
  return testHost({
    name: 'remote',
    ssh: `${user}@${server.host.includes(':') ? `[${server.host}]` : server.host}`,
    sshPort: server.port,
    identityFile: server.identityFile,
    knownHosts: server.knownHostsFile,
    ...overrides,
  });
}

function transportFor(t: TestContext, host: HostSpec, opts: SshTransportOptions = {}): SshTransport {
  const transport = new SshTransport(host, opts);
  t.after(() => transport.close());
  return transport;
}

/** Poll the remote log through the transport until the replica's report line appears. */
function remoteReport(transport: SshTransport, logPath: string): Promise<ReplicaReport> {
  return waitFor(`the replica report in remote ${logPath}`, async () => parseReport((await transport.tailLog(logPath, 50)).join('\n')));
}

function isLaunchError(code: LaunchError['code'], pattern?: RegExp) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof LaunchError, `expected a LaunchError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    if (pattern !== undefined) assert.match(err.message, pattern);
    return true;
  };
}

describe('parseSshDestination', () => {
  it('reads user@host, host (current user) and user@[v6]', () => {
    assert.deepEqual(parseSshDestination('ops@gpu1'), { user: 'ops', host: 'gpu1' });
    assert.deepEqual(parseSshDestination('gpu1.example.com'), { user, host: 'gpu1.example.com' });
    assert.deepEqual(parseSshDestination('ops@[::1]'), { user: 'ops', host: '::1' });
    assert.deepEqual(parseSshDestination('[fe80::1]'), { user, host: 'fe80::1' });
    assert.throws(() => parseSshDestination('ops@'), /needs a host/);
  });
});

describe('SshTransport against an in-process ssh2 server', () => {
  let server: TestSshServer;
  before(async () => {
    server = await startSshServer();
  });
  after(() => server.close());

  it('launches remotely (log written, pid returned), probes, tails and stops it over ONE connection', async (t) => {
    const dir = replicaTempDir(t, 'ssh-transport-');
    const logPath = join(dir, 'remote logs', 'remote-d0.log');
    const connectionsBefore = server.connections;
    const host = hostFor(server, { env: { LAUNCHER_TEST_FOO: 'from host env' } });
    const transport = transportFor(t, host);

    const launched = await transport.launch({ slot: testSlot(host), host, argv: replicaArgv(['--grandchild']), env: host.env, logPath });
    t.after(() => killQuietly(launched.pid));
    assert.equal(launched.exited, undefined, 'ssh launches have no local exit promise');
    const report = await remoteReport(transport, logPath);
    t.after(() => killQuietly(report.grandchild));
    assert.equal(report.pid, launched.pid);
    assert.equal(report.foo, 'from host env');
    const lines = await waitFor('stderr in the remote log', async () => {
      const tail = await transport.tailLog(logPath, 10);
      return tail.some((l) => l === `STDERR-LINE from ${launched.pid}`) ? tail : undefined;
    });
    assert.ok(lines.length >= 2);
    assert.ok((await readFile(logPath, 'utf8')).includes('REPLICA '), 'the log file exists on the "remote" machine');
    assert.equal(await transport.isAlive(launched.pid), true);

    await transport.stop({ pid: launched.pid, env: {}, killAfterMs: 10_000 });
    assert.equal(await transport.isAlive(launched.pid), false);
    assert.ok(report.grandchild !== undefined);
    await waitFor('the remote grandchild to be gone', () => processGone(report.grandchild ?? 0));
    assert.equal(server.connections - connectionsBefore, 1, 'every command reused the one connection');
  });

  it('shares one connection between concurrent commands and re-creates it after it closed', async (t) => {
    const transport = transportFor(t, hostFor(server));
    const before = server.connections;
    const answers = await Promise.all(Array.from({ length: 20 }, () => transport.isAlive(process.pid)));
    assert.ok(answers.every((a) => a));
    assert.equal(server.connections - before, 1);
    server.dropConnections();
    await waitFor('a reconnect to succeed', async () => transport.isAlive(process.pid).catch(() => false));
    assert.equal(server.connections - before, 2);
    await transport.close();
    assert.equal(await transport.isAlive(process.pid), true);
    assert.equal(server.connections - before, 3);
  });

  it('runs a `pkill -f` stop_command without killing its own shell (exit 0, replica gone)', async (t) => {
    const dir = replicaTempDir(t, 'ssh stop dir ');
    const marker = `ssh-stop-marker-${randomBytes(6).toString('hex')}`;
    const host = hostFor(server);
    const transport = transportFor(t, host);
    const logPath = join(dir, 'r.log');
    const launched = await transport.launch({ slot: testSlot(host), host, argv: replicaArgv([`--tag=${marker}`]), env: {}, logPath });
    t.after(() => killQuietly(launched.pid));
    await remoteReport(transport, logPath);

    await transport.stop({ pid: launched.pid, stopArgv: ['pkill', '-f', marker], env: {}, workdir: dir, killAfterMs: 10_000 });
    assert.ok(server.execLog.at(-1)?.startsWith(`cd '${dir}' && exec env 'pkill'`), server.execLog.at(-1));
    await waitFor('the replica to be gone', () => processGone(launched.pid));
  });

  it('escalates to SIGKILL for a remote process that ignores SIGTERM', async (t) => {
    const dir = replicaTempDir(t, 'ssh-transport-');
    const host = hostFor(server);
    const transport = transportFor(t, host, { pollIntervalMs: 50 });
    const logPath = join(dir, 'r.log');
    const launched = await transport.launch({ slot: testSlot(host), host, argv: replicaArgv(['--ignore-term']), env: {}, logPath });
    t.after(() => killQuietly(launched.pid));
    await remoteReport(transport, logPath);
    await transport.stop({ pid: launched.pid, env: {}, killAfterMs: 400 });
    await waitFor('the replica to be gone', () => processGone(launched.pid));
    assert.ok((await transport.tailLog(logPath, 10)).includes('ignored SIGTERM'));
    assert.ok(server.execLog.some((l) => l.startsWith(`kill -s KILL -- -${launched.pid}`)));
  });

  it('passes a hostile model name as one literal argv word; nothing is injected', async (t) => {
    const dir = replicaTempDir(t, 'ssh-transport-');
    const pwned = join(tmpdir(), `pwned-${randomBytes(6).toString('hex')}`);
    const evil = `llama $(touch ${pwned}); touch ${pwned}; \`touch ${pwned}\` 'x' "y" | & > /dev/null`;
    const host = hostFor(server);
    const transport = transportFor(t, host);
    const logPath = join(dir, 'r.log');
    const launched = await transport.launch({ slot: testSlot(host), host, argv: replicaArgv(['--model', evil]), env: {}, logPath });
    t.after(() => killQuietly(launched.pid));
    const report = await remoteReport(transport, logPath);
    assert.deepEqual(report.argv, ['--model', evil]);
    assert.equal(existsSync(pwned), false, `${pwned} must not be created`);
    assert.ok(
      server.execLog.some((l) => l.includes(`'llama $(touch ${pwned}); touch`)),
      'the word was sent single-quoted',
    );
  });

  it('cds into a workdir with spaces before nohup', async (t) => {
    const dir = replicaTempDir(t, 'ssh-transport-');
    const workdir = join(dir, 'my work dir');
    await mkdir(workdir);
    const host = hostFor(server);
    const transport = transportFor(t, host);
    const logPath = join(dir, 'r.log');
    const launched = await transport.launch({ slot: testSlot(host), host, argv: replicaArgv(), env: {}, logPath, workdir });
    t.after(() => killQuietly(launched.pid));
    assert.equal((await remoteReport(transport, logPath)).cwd, await realpath(workdir));
    const line = server.execLog.find((l) => l.includes(`cd '${workdir}'`));
    assert.ok(line !== undefined);
    assert.ok(line.indexOf(`cd '${workdir}'`) < line.indexOf('nohup'), line);
  });

  it('refuses an unknown host key before anything runs, naming host, port and fingerprint', async (t) => {
    const dir = replicaTempDir(t, 'ssh-transport-');
    const empty = join(dir, 'known_hosts');
    await writeFile(empty, '');
    const execs = server.execLog.length;
    const authed = server.authenticated;
    for (const knownHosts of [empty, join(dir, 'missing_known_hosts')]) {
      const transport = transportFor(t, hostFor(server, { knownHosts }));
      await assert.rejects(transport.isAlive(process.pid), isLaunchError('host_key_rejected'));
      const err = await transport.tailLog('/etc/hostname', 1).catch((e: unknown) => e);
      assert.ok(err instanceof LaunchError);
      assert.ok(err.message.includes('127.0.0.1') && err.message.includes(String(server.port)), err.message);
      assert.ok(err.message.includes(server.hostKeyFingerprint), err.message);
      assert.match(err.message, /ssh-keyscan -p \d+ 127\.0\.0\.1 >> /);
      assert.match(err.message, /insecure_accept_host_key/);
    }
    assert.equal(server.execLog.length, execs, 'nothing was executed');
    assert.equal(server.authenticated, authed, 'the client never authenticated');
  });

  it('refuses a changed host key', async (t) => {
    const dir = replicaTempDir(t, 'ssh-transport-');
    const other = ed25519KeyPair().public.split(' ').slice(0, 2).join(' ');
    const knownHosts = join(dir, 'known_hosts');
    await writeFile(knownHosts, `[127.0.0.1]:${server.port} ${other}\n`);
    const transport = transportFor(t, hostFor(server, { knownHosts }));
    await assert.rejects(transport.isAlive(process.pid), isLaunchError('host_key_rejected', /does NOT match .* line\(s\) 1/));
  });

  it('accepts an unknown host key with insecure_accept_host_key, warning once', async (t) => {
    const dir = replicaTempDir(t, 'ssh-transport-');
    const warnings: string[] = [];
    const host = hostFor(server, { knownHosts: join(dir, 'missing'), insecureAcceptHostKey: true });
    const transport = transportFor(t, host, { logger: (msg) => warnings.push(msg) });
    assert.equal(await transport.isAlive(process.pid), true);
    await transport.close();
    assert.equal(await transport.isAlive(process.pid), true);
    const insecure = warnings.filter((w) => w.includes('insecure_accept_host_key'));
    assert.equal(insecure.length, 1);
    assert.ok(insecure[0].includes(server.hostKeyFingerprint));
  });

  it('never puts identity file contents into errors', async (t) => {
    const dir = replicaTempDir(t, 'ssh-transport-');
    const wrongKey = join(dir, 'id_wrong');
    const pair = ed25519KeyPair();
    await writeFile(wrongKey, pair.private, { mode: 0o600 });
    const garbage = join(dir, 'id_garbage');
    const secret = `SECRET-KEY-MATERIAL-${randomBytes(12).toString('hex')}`;
    await writeFile(garbage, `-----BEGIN OPENSSH PRIVATE KEY-----\n${secret}\n-----END OPENSSH PRIVATE KEY-----\n`, { mode: 0o600 });
    const cases: Array<[string, string]> = [
      [wrongKey, pair.private],
      [garbage, secret],
    ];
    for (const [identityFile, contents] of cases) {
      const transport = transportFor(t, hostFor(server, { identityFile }));
      const err = await transport.isAlive(process.pid).catch((e: unknown) => e);
      assert.ok(err instanceof LaunchError, String(err));
      assert.equal(err.code, 'ssh_connect_failed');
      assert.ok(err.message.includes(identityFile), 'the path is named');
      const rendered = `${err.message}\n${err.stack ?? ''}\n${String(err)}\n${JSON.stringify(err)}`;
      for (const line of contents.split('\n').filter((l) => l.length > 16 && !l.startsWith('-----'))) {
        assert.ok(!rendered.includes(line), 'key material leaked into the error');
      }
    }
    const missing = transportFor(t, hostFor(server, { identityFile: join(dir, 'absent') }));
    await assert.rejects(missing.isAlive(process.pid), isLaunchError('ssh_connect_failed', /identity_file .*absent.*ENOENT/));
  });

  it('reports a failing remote command with its exit code and output, and bounds hanging ones', async (t) => {
    const host = hostFor(server);
    const transport = transportFor(t, host, { commandTimeoutMs: 300 });
    await assert.rejects(
      transport.stop({ pid: null, stopArgv: ['sh', '-c', 'echo remote-boom >&2; exit 7'], env: {}, killAfterMs: 100 }),
      isLaunchError('stop_failed', /exited with code 7.*remote-boom/s),
    );
    await assert.rejects(
      transport.stop({ pid: null, stopArgv: ['sleep', '5'], env: {}, killAfterMs: 100 }),
      isLaunchError('stop_failed', /did not finish within 300 ms/),
    );
    const dir = replicaTempDir(t, 'ssh-transport-');
    await assert.rejects(
      transport.launch({ slot: testSlot(host), host, argv: ['sleep', '5'], env: {}, logPath: join(dir, 'l.log'), workdir: join(dir, 'missing') }),
      isLaunchError('remote_command_failed', /exited with code [1-9]/),
    );
  });

  it('connects as the current user when `ssh` names only the host', async (t) => {
    const transport = transportFor(t, hostFor(server, { ssh: '127.0.0.1' }));
    assert.equal(await transport.isAlive(process.pid), true);
  });

  it('works over IPv6 (user@[::1])', async (t) => {
    const v6 = await startSshServer({ host: '::1' }).catch(() => null);
    if (v6 === null) {
      t.skip('IPv6 loopback is not available');
      return;
    }
    t.after(() => v6.close());
    const transport = transportFor(t, hostFor(v6));
    assert.equal(await transport.isAlive(process.pid), true);
    assert.deepEqual(await transport.tailLog('/no/such/log', 5), []);
  });
});
