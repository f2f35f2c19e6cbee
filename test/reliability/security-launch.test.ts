/**
 * Issue 7, scenario 10 (launches): the admin API can only launch on hosts declared in the config
 * and cannot supply commands; no config value reaches a shell unquoted, whether the argv is
 * spawned locally, wrapped by a `launch_wrapper` shell, or sent over ssh (where a shell parses
 * the line); and the ssh identity file's contents never appear in logs, API answers, metrics,
 * the state file or the remote command lines.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { simRequest, stopAllSims } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';
import { freePortRange, pidAlive } from '../support/router-process.js';
import { simHost } from '../support/fleet.js';
import { startSshServer, type TestSshServer } from '../../src/modules/launcher/transports/ssh-server.fake.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

const ENV = { ROUTER_ADMIN_TOKEN: TEST_TOKEN };

/** A model name that runs three commands if any shell ever parses it unquoted. */
function hostileModel(): { model: string; markers: string[] } {
  const id = randomBytes(6).toString('hex');
  const markers = [1, 2, 3, 4].map((i) => join(tmpdir(), `pwned${i}-${id}`));
  const model = `x$(touch ${markers[0]});touch ${markers[1]} \`touch ${markers[2]}\` 'q' "dq" $HOME {port} | touch ${markers[3]} #`;
  return { model, markers };
}

interface Row {
  name: string;
  ready: boolean;
  url: string;
  pid: number;
}
const readyReplica = (router: TestRouter, name: string): Promise<Row> =>
  waitFor(
    async () => ((await adminCall(router, 'GET', '/replicas')).body.replicas as Row[]).find((r) => r.name === name && r.ready),
    15_000,
    `${name} to be ready`,
  );

describe('launch security (issue 7 §10)', () => {
  const routers: TestRouter[] = [];
  const servers: TestSshServer[] = [];
  const pids: number[] = [];
  const start = async (config: unknown, flags: string[] = ['--initial-replicas', '0']): Promise<TestRouter> => {
    const r = await startTestRouter(config, flags, ENV);
    routers.push(r);
    return r;
  };
  after(async () => {
    for (const r of routers) await r.close().catch(() => undefined);
    for (const s of servers) await s.close().catch(() => undefined);
    for (const pid of pids) if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
    await stopAllSims();
  });

  it('launches only on config-declared hosts and takes no command, path or address from the API', async () => {
    const base = await freePortRange(1);
    const router = await start({ hosts: [simHost('h', [0], base)] });
    for (const host of ['other', '127.0.0.1', 'localhost', 'h-d0', 'H', '../h', 'h ', '', 'h\u0000']) {
      const r = await adminCall(router, 'POST', '/replicas', { body: { host } });
      // a well-formed name that is not declared is unknown (404); a malformed one is refused by validation (400)
      const wellFormed = /^[A-Za-z0-9._:-]{1,64}$/.test(host);
      if (wellFormed) assert.equal(r.status, 404, JSON.stringify(host));
      else assert.ok(r.status === 400 || r.status === 404, `${JSON.stringify(host)}: ${r.status}`);
      if (r.status === 404) assert.equal(r.body.code, 'unknown_host');
    }
    for (const body of [
      { host: 'h', command: ['sh', '-c', 'id'] },
      { host: 'h', ssh: 'root@evil' },
      { count: 1, port: 22 },
      { host: ['h'] },
      { host: { name: 'h' } },
    ]) {
      const r = await adminCall(router, 'POST', '/replicas', { body });
      assert.equal(r.status, 400, JSON.stringify(body));
    }
    // A model only selects among the declared hosts (contract §4.3): none serves this one, nothing runs.
    const other = await adminCall(router, 'POST', '/replicas', { body: { host: 'h', model: 'other' } });
    assert.equal(other.status, 404);
    assert.equal(other.body.code, 'unknown_model');
    assert.deepEqual((await adminCall(router, 'GET', '/replicas')).body.replicas, [], 'nothing was launched');
    assert.equal(router.logs().filter((l) => l['event'] === 'launch').length, 0);
    const ok = await adminCall(router, 'POST', '/replicas', { body: { host: 'h' } });
    assert.equal(ok.status, 202);
    assert.equal(ok.body.name, 'h-d0');
    pids.push((await readyReplica(router, 'h-d0')).pid);
  });

  it('passes a model full of shell syntax literally: local argv, a launch_wrapper shell, and env', async () => {
    const { model, markers } = hostileModel();
    const base = await freePortRange(2);
    const local = simHost('local', [0], base, [], { model, env: { SIM_MODEL_ECHO: '{model}' } });
    const wrapped = simHost('wrapped', [1], base, [], { model, launch_wrapper: ['sh', '-c'] });
    const router = await start({ hosts: [local, wrapped] }, ['--initial-replicas', '2']);
    for (const name of ['local-d0', 'wrapped-d1']) {
      const rep = await readyReplica(router, name);
      pids.push(rep.pid);
      const models = JSON.parse((await simRequest(`${rep.url}/v1/models`)).body.toString()) as { data: Array<{ id: string }> };
      assert.equal(models.data[0]?.id, model, `${name} was given the model string literally`);
    }
    const localPid = (await readyReplica(router, 'local-d0')).pid;
    assert.ok(readFileSync(`/proc/${localPid}/environ`, 'utf8').split('\0').includes(`SIM_MODEL_ECHO=${model}`), 'env value passed literally');
    for (const m of markers) assert.equal(existsSync(m), false, `${m} was created: a shell ran config text`);
  });

  it("quotes every word of the remote line over ssh, and never shows the identity file's contents", async () => {
    const server = await startSshServer();
    servers.push(server);
    const { model, markers } = hostileModel();
    const base = await freePortRange(1);
    const state = join(tempDir('ar-sshsec-'), 'state.json');
    const host = simHost('remote', [0], base, [], {
      model,
      ssh: `${userInfo().username}@127.0.0.1`,
      ssh_port: server.port,
      identity_file: server.identityFile,
      known_hosts: server.knownHostsFile,
      workdir: tmpdir(),
    });
    const router = await start({ hosts: [host] }, ['--initial-replicas', '1', '--state-file', state]);
    const rep = await readyReplica(router, 'remote-d0');
    pids.push(rep.pid);
    const models = JSON.parse((await simRequest(`${rep.url}/v1/models`)).body.toString()) as { data: Array<{ id: string }> };
    assert.equal(models.data[0]?.id, model, 'the remote replica was given the model string literally');
    for (const m of markers) assert.equal(existsSync(m), false, `${m} was created: the remote shell ran config text`);
    assert.ok(
      server.execLog.some((c) => c.includes('nohup')),
      'launched through the ssh server',
    );

    const key = readFileSync(server.identityFile, 'utf8');
    const secrets = key.split('\n').filter((l) => l.length >= 16 && !l.startsWith('-----'));
    assert.ok(secrets.length > 0);
    const del = await adminCall(router, 'DELETE', '/replicas/remote-d0');
    assert.equal(del.status, 200);
    const answers = await Promise.all(['/replicas', '/fleet', '/sessions'].map((p) => adminCall(router, 'GET', p)));
    const places: Array<[string, string]> = [
      ['log', JSON.stringify(router.logs())],
      ['admin answers', JSON.stringify(answers.map((a) => a.body))],
      ['delete answer', JSON.stringify(del.body)],
      ['metrics', (await simRequest(`${router.url}/metrics`)).body.toString()],
      ['state file', readFileSync(state, 'utf8')],
      ['remote command lines', server.execLog.join('\n')],
    ];
    for (const [where, text] of places) {
      for (const s of secrets) assert.equal(text.includes(s), false, `identity file contents in the ${where}`);
      assert.equal(text.includes(key.slice(40, 80)), false, `identity file contents in the ${where}`);
    }
  });
});
