import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { stopAllSims } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { freePortRange, pidAlive } from '../support/router-process.js';
import { simHost } from '../support/fleet.js';
import { startSshServer } from '../support/ssh-server.js';
import { startRealSshd, realSshdUnavailableReason } from '../support/real-sshd.js';

const ENV = { ROUTER_ADMIN_TOKEN: TEST_TOKEN };

interface SshTarget {
  port: number;
  identityFile: string;
  knownHostsFile: string;
  close(): Promise<void>;
}

/** Launch a simulator through ssh, serve a request, stop it: the log is written on the (remote) host. */
async function launchAndStop(target: SshTarget): Promise<void> {
  const base = await freePortRange(1);
  const host = simHost('remote', [0], base, [], {
    ssh: `${userInfo().username}@127.0.0.1`,
    ssh_port: target.port,
    identity_file: target.identityFile,
    known_hosts: target.knownHostsFile,
  });
  const router = await startTestRouter({ hosts: [host] }, ['--initial-replicas', '1'], ENV);
  try {
    const rep = await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas.find((r: { ready: boolean }) => r.ready), 15_000, 'the ssh replica to be ready');
    assert.equal(rep.name, 'remote-d0');
    assert.ok(Number.isInteger(rep.pid) && pidAlive(rep.pid));
    const logPath = `${host.log_dir}/remote-d0.log`;
    assert.equal(rep.log_path, logPath);
    await waitFor(() => existsSync(logPath) && readFileSync(logPath, 'utf8').includes('listening'), 5_000, 'the remote log');
    const del = await adminCall(router, 'DELETE', '/replicas/remote-d0');
    assert.equal(del.status, 200);
    await waitFor(() => !pidAlive(rep.pid), 5_000, 'the remote process to be gone');
    assertNoKeyMaterial(router, target.identityFile);
  } finally {
    await router.close();
  }
}

function assertNoKeyMaterial(router: TestRouter, identityFile: string): void {
  const key = readFileSync(identityFile, 'utf8');
  const body = key.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----'))[0]!;
  assert.equal(JSON.stringify(router.logs()).includes(body), false, 'identity file contents in the log');
}

describe('ssh hosts (SPEC §7)', () => {
  after(stopAllSims);

  it('launches and stops a replica through an in-process ssh2 server', async () => {
    const server = await startSshServer();
    try {
      await launchAndStop(server);
      assert.ok(server.execLog.some((c) => c.includes('nohup') && c.includes('remote-d0')), 'launched with nohup');
    } finally {
      await server.close();
    }
  });

  it('launches and stops a replica through a real sshd', async (t) => {
    const sshd = await startRealSshd();
    if (sshd === null) return t.skip(`real sshd unavailable: ${realSshdUnavailableReason() ?? 'not installed'}`);
    try {
      await launchAndStop(sshd);
    } finally {
      await sshd.close();
    }
  });

  it('refuses an unknown host key with a clear error and executes nothing', async () => {
    const server = await startSshServer();
    const other = await startSshServer();
    try {
      const base = await freePortRange(1);
      const host = simHost('stranger', [0], base, [], {
        ssh: `${userInfo().username}@127.0.0.1`,
        ssh_port: server.port,
        identity_file: server.identityFile,
        known_hosts: other.knownHostsFile, // the wrong host key
      });
      const router = await startTestRouter({ hosts: [host] }, ['--initial-replicas', '0'], ENV);
      try {
        const r = await adminCall(router, 'POST', '/replicas');
        assert.equal(r.status, 502);
        assert.match(r.body.message, /host key/i);
        assert.match(r.body.message, /SHA256:/);
        assert.equal(server.execLog.length, 0);
        assert.deepEqual(r.body.capacity.free_slots, ['stranger-d0']);
        assertNoKeyMaterial(router, server.identityFile);
        assert.equal(JSON.stringify(r.body).includes(readFileSync(server.identityFile, 'utf8').slice(40, 80)), false);
      } finally {
        await router.close();
      }
    } finally {
      await server.close();
      await other.close();
    }
  });
});
