import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { spawnSim, stopAllSims } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { freePortRange, pidAlive } from '../support/router-process.js';
import { fleetEvents, simHost } from '../support/fleet.js';
import { startSshServer, type TestSshServer } from '../../src/modules/launcher/transports/ssh-server.fake.js';
import { startRealSshd, realSshdUnavailableReason } from '../../src/modules/launcher/transports/real-sshd.fake.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

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
    const rep = await waitFor(
      async () => (await adminCall(router, 'GET', '/replicas')).body.replicas.find((r: { ready: boolean }) => r.ready),
      15_000,
      'the ssh replica to be ready',
    );
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

/** The config fields that put a host behind the in-process ssh2 server. */
function viaSsh(server: TestSshServer): Record<string, unknown> {
  return { ssh: `${userInfo().username}@127.0.0.1`, ssh_port: server.port, identity_file: server.identityFile, known_hosts: server.knownHostsFile };
}

function assertNoKeyMaterial(router: TestRouter, identityFile: string): void {
  const key = readFileSync(identityFile, 'utf8');
  const body = key.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----'))[0];
  assert.equal(JSON.stringify(router.logs()).includes(body), false, 'identity file contents in the log');
}

describe('ssh hosts (contract §7)', () => {
  after(stopAllSims);

  it('launches and stops a replica through an in-process ssh2 server', async () => {
    const server = await startSshServer();
    try {
      await launchAndStop(server);
      assert.ok(
        server.execLog.some((c) => c.includes('nohup') && c.includes('remote-d0')),
        'launched with nohup',
      );
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

  it('stops a replica with a `pkill -f` stop_command run by the remote shell, which survives it; no signal fallback runs', async () => {
    const server = await startSshServer();
    try {
      const base = await freePortRange(1);
      // The pattern is also in the command line of the shell that runs pkill: unless that shell
      // is replaced by pkill (exec), pkill -f kills it too and the stop reports a failure.
      const host = simHost('pk', [0], base, [], { ...viaSsh(server), stop_command: ['pkill', '-f', 'replica.js --port {port} '] });
      const router = await startTestRouter({ hosts: [host] }, ['--initial-replicas', '1'], ENV);
      try {
        const rep = await waitFor(
          async () => (await adminCall(router, 'GET', '/replicas')).body.replicas.find((r: { ready: boolean }) => r.ready),
          15_000,
          'the ssh replica to be ready',
        );
        assert.ok(pidAlive(rep.pid));
        const del = await adminCall(router, 'DELETE', '/replicas/pk-d0');
        assert.equal(del.status, 200);
        assert.equal(del.body.stopped, true);
        await waitFor(() => !pidAlive(rep.pid), 5_000, 'the replica process to be gone');
        const stops = server.execResults.filter((x) => x.command.includes("'pkill' '-f'"));
        assert.equal(stops.length, 1, 'the stop command ran once');
        assert.match(stops[0].command, new RegExp(`'replica\\.js --port ${base} '`));
        assert.deepEqual([stops[0].code, stops[0].signal], [0, null], 'its shell exited 0 (pkill matched the replica) and was not killed');
        assert.equal(
          server.execLog.some((c) => /\bkill -s (TERM|KILL)\b/.test(c)),
          false,
          'no TERM/KILL fallback was sent',
        );
        assert.equal(
          router.logs().some((l) => l['event'] === 'stop_failed'),
          false,
        );
        await router.waitForLog((l) => l['event'] === 'stop' && l['replica'] === 'pk-d0');
      } finally {
        await router.close();
      }
    } finally {
      await server.close();
    }
  });

  it('reports an ssh replica whose remote process vanishes before it is ready, frees its slot and counts it as an exit', async () => {
    const server = await startSshServer();
    try {
      const base = await freePortRange(1);
      const host = simHost('gone', [0], base, ['--startup-delay', '60'], viaSsh(server));
      const router = await startTestRouter({ hosts: [host] }, ['--initial-replicas', '1'], ENV);
      try {
        const rep = await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas[0], 10_000, 'the launch');
        assert.equal(rep.state, 'launching');
        process.kill(rep.pid, 'SIGKILL');
        const fleet = await waitFor(
          async () => {
            const f = (await adminCall(router, 'GET', '/fleet')).body;
            return f.failures.length > 0 && f.slots[0].state === 'free' ? f : undefined;
          },
          10_000,
          'the vanished replica to be reported',
        );
        assert.match(fleet.failures[0].reason, /remote process is gone before becoming ready/);
        assert.equal(fleet.failures[0].log_path, `${host.log_dir}/gone-d0.log`);
        assert.deepEqual(await fleetEvents(router), { launch: 1, stop: 1, adoption: 0, launch_failure: 0, launch_timeout: 0, exit: 1 });
        assert.equal((await adminCall(router, 'GET', '/replicas')).body.replicas.length, 0);
      } finally {
        await router.close();
      }
    } finally {
      await server.close();
    }
  });

  it('adopts an ssh replica with its pid only when the remote host proves it holds the port', async () => {
    const server = await startSshServer();
    const base = await freePortRange(2);
    const proven = await spawnSim({ name: 'r-d0', port: base });
    const unproven = await spawnSim({ name: 'r-d1', port: base + 1 });
    const sleeper = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    try {
      const state = join(tempDir('ar-ssh-adopt-'), 'state.json');
      const entry = (slot: string, device: number, pid: number) => ({
        slot,
        host: 'r',
        devices: [device],
        address: '127.0.0.1',
        port: base + device,
        scheme: 'http',
        pid,
        launched_at: null,
        model: 'sim-model',
      });
      writeFileSync(state, JSON.stringify({ version: 1, epoch: 1, replicas: [entry('r-d0', 0, proven.pid), entry('r-d1', 1, sleeper.pid!)], sessions: [] }));
      const host = simHost('r', [0, 1], base, [], viaSsh(server));
      const router = await startTestRouter({ hosts: [host] }, ['--initial-replicas', '2', '--state-file', state], ENV);
      try {
        const list = (await adminCall(router, 'GET', '/replicas')).body.replicas;
        assert.deepEqual(
          list.map((r: { name: string; kind: string; pid: number | null }) => [r.name, r.kind, r.pid]),
          [
            ['r-d0', 'adopted', proven.pid],
            ['r-d1', 'adopted', null],
          ],
        );
        assert.ok(
          server.execLog.some((c) => c.includes('/proc/net/tcp')),
          'the identity was checked on the remote host',
        );
        const why = await router.waitForLog((l) => l['event'] === 'adopt_pid_unproven' && l['replica'] === 'r-d1');
        assert.match(String(why['reason']), new RegExp(`neither pid ${sleeper.pid} nor its process group holds the socket listening on port ${base + 1}`));
        assert.equal((await adminCall(router, 'DELETE', '/replicas/r-d1')).status, 409);
        assert.equal((await adminCall(router, 'DELETE', '/replicas/r-d0')).status, 200);
        await proven.exited(); // signalled through ssh by its proven pid
      } finally {
        await router.close();
      }
      assert.equal(pidAlive(sleeper.pid!), true, 'the unproven pid was never signalled');
      assert.equal((await unproven.stats()).name, 'r-d1', 'the replica without a proven pid keeps running');
    } finally {
      sleeper.kill('SIGKILL');
      await server.close();
    }
  });
});
