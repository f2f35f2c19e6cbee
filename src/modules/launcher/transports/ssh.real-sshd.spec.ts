import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, realpath, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';

import type { HostSpec } from '../../../config/router-config.js';
import { LaunchError } from '../launcher.transport.js';
import { realSshdUnavailableReason, startRealSshd, type RealSshd } from './real-sshd.fake.js';
import { killQuietly, parseReport, processGone, replicaArgv, replicaTempDir, testSlot, waitFor, type ReplicaReport } from './replica-process.fake.js';
import { SshTransport } from './ssh.transport.js';
import { testHost } from '../../../config/test-host.fake.js';

const unavailable = realSshdUnavailableReason();

/** The same flows as ssh.transport.spec.ts, against the system OpenSSH server (root's login shell). */
describe('SshTransport against a real sshd', { skip: unavailable ?? false }, () => {
  let sshd: RealSshd | undefined;
  before(async () => {
    const started = await startRealSshd();
    assert.ok(started !== null, 'sshd is installed and we are root, yet it was not started');
    sshd = started;
  });
  after(() => sshd?.close());

  function server(): RealSshd {
    assert.ok(sshd !== undefined, 'sshd started');
    return sshd;
  }

  const hostFor = (overrides: Partial<HostSpec> = {}): HostSpec =>
    testHost({
      name: 'real',
      ssh: `${server().user}@127.0.0.1`,
      sshPort: server().port,
      identityFile: server().identityFile,
      knownHosts: server().knownHostsFile,
      ...overrides,
    });

  function transportFor(t: TestContext, host: HostSpec): SshTransport {
    const transport = new SshTransport(host, { pollIntervalMs: 100 });
    t.after(() => transport.close());
    return transport;
  }

  function remoteReport(transport: SshTransport, logPath: string): Promise<ReplicaReport> {
    return waitFor(`the replica report in ${logPath}`, async () => parseReport((await transport.tailLog(logPath, 50)).join('\n')));
  }

  it('launches (log written remotely, pid echoed), probes, tails and stops a replica group', async (t) => {
    const dir = replicaTempDir(t, 'real-sshd-flows-');
    const host = hostFor({ env: { LAUNCHER_TEST_FOO: "it's from the host" } });
    const transport = transportFor(t, host);
    const logPath = join(dir, 'logs dir', `${randomBytes(4).toString('hex')}.log`);
    const launched = await transport.launch({ slot: testSlot(host), host, argv: replicaArgv(['--grandchild']), env: host.env, logPath });
    t.after(() => killQuietly(launched.pid));
    const report = await remoteReport(transport, logPath);
    t.after(() => killQuietly(report.grandchild));
    assert.equal(report.pid, launched.pid);
    assert.equal(report.foo, "it's from the host");
    assert.equal(await transport.isAlive(launched.pid), true);
    await transport.stop({ pid: launched.pid, env: {}, killAfterMs: 10_000 });
    assert.equal(await transport.isAlive(launched.pid), false);
    await waitFor('the grandchild to be gone', () => processGone(report.grandchild ?? 0));
  });

  it('runs a `pkill -f` stop_command that does not kill its own shell', async (t) => {
    const dir = replicaTempDir(t, 'real-sshd-flows-');
    const host = hostFor();
    const transport = transportFor(t, host);
    const marker = `real-sshd-marker-${randomBytes(6).toString('hex')}`;
    const logPath = join(dir, `${marker}.log`);
    const launched = await transport.launch({ slot: testSlot(host), host, argv: replicaArgv([`--tag=${marker}`]), env: {}, logPath });
    t.after(() => killQuietly(launched.pid));
    await remoteReport(transport, logPath);
    await transport.stop({ pid: launched.pid, stopArgv: ['pkill', '-f', marker], env: {}, workdir: dir, killAfterMs: 10_000 });
    await waitFor('the replica to be gone', () => processGone(launched.pid));
  });

  it('passes a hostile model name literally and honours a workdir with spaces', async (t) => {
    const dir = replicaTempDir(t, 'real-sshd-flows-');
    const host = hostFor();
    const transport = transportFor(t, host);
    const workdir = join(dir, `work dir ${randomBytes(3).toString('hex')}`);
    await mkdir(workdir);
    const pwned = join(tmpdir(), `pwned-${randomBytes(6).toString('hex')}`);
    const evil = `m $(touch ${pwned}); touch ${pwned} \`touch ${pwned}\``;
    const logPath = join(workdir, 'r.log');
    const launched = await transport.launch({ slot: testSlot(host), host, argv: replicaArgv(['--model', evil]), env: {}, logPath, workdir });
    t.after(() => killQuietly(launched.pid));
    const report = await remoteReport(transport, logPath);
    assert.deepEqual(report.argv, ['--model', evil]);
    assert.equal(report.cwd, await realpath(workdir));
    assert.equal(existsSync(pwned), false);
  });

  it('refuses an unknown host key', async (t) => {
    const dir = replicaTempDir(t, 'real-sshd-flows-');
    const knownHosts = join(dir, 'empty_known_hosts');
    await writeFile(knownHosts, '');
    const transport = transportFor(t, hostFor({ knownHosts }));
    await assert.rejects(transport.isAlive(process.pid), (err: unknown) => {
      assert.ok(err instanceof LaunchError);
      assert.equal(err.code, 'host_key_rejected');
      assert.ok(err.message.includes(server().hostKeyFingerprint), err.message);
      return true;
    });
  });
});
