import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stopAllSims } from '../support/sim-process.js';
import { adminCall, TEST_TOKEN, waitFor, writeTempConfig } from '../support/router.js';
import { freePortRange, spawnRouter, type RouterProcess } from '../support/router-process.js';
import { startSshServer } from '../../src/modules/launcher/transports/ssh-server.fake.js';
import { shellWords } from '../../src/config/shell-words.fake.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const RECORDER = resolve(HERE, '../support/record-argv.js');
/** The shipped example, read from the repository (the compiled test is three levels below it). */
const PYPTO_CONFIG = resolve(HERE, '../../../config/pypto.json');

/** What a stub program recorded about how it was started. */
interface Recorded {
  prog: string;
  argv: string[];
  cwd: string;
  env: { ASCEND_RT_VISIBLE_DEVICES: string | null; PYPTO_DEVICE: string | null };
}

/**
 * A directory of stand-ins for the programs config/pypto.json starts (`python3`, `task-submit`):
 * each records its name, argv, cwd and the {device} env into `$PYPTO_RECORD_DIR/<name>-<devices>.json`
 * and exits. Nothing listens: only the launch argv is under test.
 */
function stubPrograms(names: string[]): { bin: string; records: string; read(file: string): Recorded | undefined } {
  const root = tempDir('ar-pypto-stub-');
  const bin = join(root, 'bin');
  const records = join(root, 'records');
  mkdirSync(bin);
  mkdirSync(records);
  const script = [
    `#!${process.execPath}`,
    "const { renameSync, writeFileSync } = require('fs');",
    "const { basename, join } = require('path');",
    'const prog = basename(process.argv[1]);',
    'const env = { ASCEND_RT_VISIBLE_DEVICES: process.env.ASCEND_RT_VISIBLE_DEVICES ?? null, PYPTO_DEVICE: process.env.PYPTO_DEVICE ?? null };',
    "const file = join(process.env.PYPTO_RECORD_DIR, prog + '-' + env.ASCEND_RT_VISIBLE_DEVICES + '.json');",
    // Written aside and renamed: the test polls for the file and must never read it half written.
    "writeFileSync(file + '.part', JSON.stringify({ prog, argv: process.argv.slice(2), cwd: process.cwd(), env }));",
    "renameSync(file + '.part', file);",
    '',
  ].join('\n');
  for (const name of names) {
    writeFileSync(join(bin, name), script);
    chmodSync(join(bin, name), 0o755);
  }
  return {
    bin,
    records,
    read: (file) => (existsSync(join(records, file)) ? (JSON.parse(readFileSync(join(records, file), 'utf8')) as Recorded) : undefined),
  };
}

describe('pypto-serving-router compatibility (contract §2)', () => {
  const procs: RouterProcess[] = [];
  after(async () => {
    for (const p of procs) {
      p.child.kill('SIGTERM');
      await p.exited();
    }
    await stopAllSims();
  });

  it('loads a pypto config unchanged with --replicas and launches the pypto serve argv as one quoted wrapper argument', async () => {
    const base = await freePortRange(2);
    const dir = tempDir('ar-pypto-');
    const record = join(dir, 'argv.json');
    // Only the keys pypto-serving-router knows; serve_args with JSON braces; env with {device}.
    const config = {
      hosts: [
        {
          name: 'node',
          devices: [0, 1, 2, 3],
          devices_per_replica: 2,
          port_base: base,
          model: '/models/qwen3 14b',
          served_model_name: 'qwen3',
          serve_args: ['--compile-config', '{"graph": true}', '--note', "it's"],
          env: { RECORD_FILE: record, DEVICE: '{device}' },
          launch_wrapper: [process.execPath, RECORDER, '{port}', 'node-d{device}'],
          log_dir: dir,
        },
      ],
    };
    const router = await spawnRouter(['--replicas', writeTempConfig(config), '--initial-replicas', '1', '--health-interval', '0.2'], {
      ROUTER_ADMIN_TOKEN: TEST_TOKEN,
    });
    procs.push(router);
    await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas[0]?.ready, 15_000, 'the wrapped replica to be ready');
    const rec = JSON.parse(readFileSync(record, 'utf8')) as { argv: string[]; env: { DEVICE: string } };
    assert.equal(rec.argv.length, 3, 'the serve command is one argument after the wrapper');
    assert.deepEqual(rec.argv.slice(0, 2), [String(base), 'node-d0']);
    assert.equal(rec.env.DEVICE, '0');
    const words = shellWords(rec.argv[2]);
    assert.deepEqual(words, [
      'python3',
      '-m',
      'pypto_serving.cli',
      '--model',
      '/models/qwen3 14b',
      '--devices',
      '0,1',
      '--host',
      '0.0.0.0',
      '--port',
      String(base),
      '--show-startup-logs',
      '--served-model-name',
      'qwen3',
      '--compile-config',
      '{"graph": true}',
      '--note',
      "it's",
    ]);
  });

  it('runs config/pypto.json as shipped with --replicas: its static replica, every slot, and the local pypto serve argv', async () => {
    const stub = stubPrograms(['python3']);
    const router = await spawnRouter(['--replicas', PYPTO_CONFIG, '--initial-replicas', '2', '--health-interval', '0.2'], {
      ROUTER_ADMIN_TOKEN: TEST_TOKEN,
      PATH: `${stub.bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
      PYPTO_RECORD_DIR: stub.records,
    });
    procs.push(router);
    const replicas = (await adminCall(router, 'GET', '/replicas')).body.replicas as Array<{ name: string; kind: string; url: string }>;
    assert.deepEqual(
      replicas.find((r) => r.kind === 'static'),
      { ...replicas.find((r) => r.kind === 'static'), name: '10.0.0.5:8000', url: 'http://10.0.0.5:8000' },
    );
    const fleet = (await adminCall(router, 'GET', '/fleet')).body;
    assert.deepEqual(
      fleet.slots.map((x: { name: string; host: string; port: number; devices: number[] }) => [x.name, x.host, x.port, x.devices]),
      [
        ['local-d0', 'local', 8001, [0]],
        ['local-d1', 'local', 8002, [1]],
        ['node02-d0', 'node02', 9001, [0, 1]],
        ['node02-d2', 'node02', 9003, [2, 3]],
      ],
    );
    // --initial-replicas fills the local host first: python3 (found on PATH) with pypto's serve argv.
    const d0 = await waitFor(() => stub.read('python3-0.json'), 10_000, 'local-d0 to be launched');
    const d1 = await waitFor(() => stub.read('python3-1.json'), 10_000, 'local-d1 to be launched');
    const serve = (device: number) => [
      '-m',
      'pypto_serving.cli',
      '--model',
      '/models/deepseek-v4',
      '--devices',
      String(device),
      '--host',
      '0.0.0.0',
      '--port',
      String(8001 + device),
      '--show-startup-logs',
      '--max-batch-size',
      '8',
    ];
    assert.deepEqual(d0.argv, serve(0));
    assert.deepEqual(d1.argv, serve(1));
    assert.deepEqual([d0.env.ASCEND_RT_VISIBLE_DEVICES, d1.env.ASCEND_RT_VISIBLE_DEVICES], ['0', '1'], 'env {device}');
    router.child.kill('SIGTERM');
    assert.equal((await router.exited()).code, 0);
  });

  it('launches the pypto ssh host (identity_file, launch_wrapper, python, workdir, env {devices}/{device}) through ssh with its argv', async () => {
    const stub = stubPrograms(['task-submit']);
    const server = await startSshServer();
    // The ssh server's shells inherit this process's environment: task-submit is found on PATH.
    const savedPath = process.env['PATH'];
    process.env['PATH'] = `${stub.bin}:${savedPath ?? '/usr/bin:/bin'}`;
    process.env['PYPTO_RECORD_DIR'] = stub.records;
    try {
      const original = JSON.parse(readFileSync(PYPTO_CONFIG, 'utf8')) as { hosts: Array<Record<string, unknown>> };
      const copy = structuredClone(original);
      const work = tempDir('ar-pypto-work-');
      const logs = join(tempDir('ar-pypto-logs-'), 'nested');
      // Only where node02 is and where it keeps files change; what it launches is as shipped.
      const moved = {
        ssh: `${userInfo().username}@127.0.0.1`,
        ssh_port: server.port,
        identity_file: server.identityFile,
        known_hosts: server.knownHostsFile,
        workdir: work,
        log_dir: logs,
      };
      Object.assign(copy.hosts[1], moved);
      for (const [k, v] of Object.entries(original.hosts[1])) if (!(k in moved)) assert.deepEqual(copy.hosts[1][k], v, k);
      const router = await spawnRouter(['--replicas', writeTempConfig(copy), '--initial-replicas', '0', '--health-interval', '0.2'], {
        ROUTER_ADMIN_TOKEN: TEST_TOKEN,
      });
      procs.push(router);
      const launched = await adminCall(router, 'POST', '/replicas', { body: { host: 'node02' } });
      assert.equal(launched.status, 202);
      assert.deepEqual([launched.body.name, launched.body.url], ['node02-d0', 'http://127.0.0.1:9001']);
      const rec = await waitFor(() => stub.read('task-submit-0,1.json'), 10_000, 'task-submit to be run over ssh');
      assert.equal(rec.cwd, work, 'cd workdir before the launch');
      assert.deepEqual(rec.env, { ASCEND_RT_VISIBLE_DEVICES: '0,1', PYPTO_DEVICE: '0' });
      assert.deepEqual(rec.argv.slice(0, 3), ['--device', '0,1', '--'], 'the wrapper as templated');
      assert.equal(rec.argv.length, 4, 'the serve command is one argument after the wrapper');
      const serve =
        '/opt/venv/bin/python -m pypto_serving.cli --model /models/deepseek-v4 --devices 0,1 --host 0.0.0.0 --port 9001 --show-startup-logs --served-model-name deepseek-v4 --max-batch-size 8 --log-level info';
      assert.deepEqual(shellWords(rec.argv[3]), serve.split(' '));
      assert.ok(existsSync(join(logs, 'node02-d0.log')), 'log directory created and log written on the machine that runs it');
      const key = readFileSync(server.identityFile, 'utf8')
        .split('\n')
        .filter((l) => l.length > 20 && !l.startsWith('-----'))[0];
      assert.equal(JSON.stringify(router.logs()).includes(key) || router.stderr().includes(key), false, 'identity file contents in the log');
      router.child.kill('SIGTERM');
      assert.equal((await router.exited()).code, 0);
    } finally {
      process.env['PATH'] = savedPath;
      delete process.env['PYPTO_RECORD_DIR'];
      await server.close();
    }
  });

  it('refuses a bad placeholder at start (exit 2, path named) instead of leaking a slot at launch', async () => {
    const cfg = writeTempConfig({ hosts: [{ devices: [0], model: 'm', launch_wrapper: ['submit', '{gpu}'] }] });
    const out = await spawnRouter(['--replicas', cfg]).then(
      () => assert.fail('started'),
      (e: Error) => e.message,
    );
    assert.match(out, /router exited \(2\)/);
    assert.match(out, /error: hosts\[0\]\.launch_wrapper\[1\]: unknown placeholder \{gpu\}/);
  });
});
