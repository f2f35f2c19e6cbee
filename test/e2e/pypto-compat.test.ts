import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { stopAllSims } from '../support/sim-process.js';
import { adminCall, TEST_TOKEN, waitFor, writeTempConfig } from '../support/router.js';
import { freePortRange, spawnRouter, type RouterProcess } from '../support/router-process.js';

const RECORDER = resolve(dirname(fileURLToPath(import.meta.url)), '../support/record-argv.js');

describe('pypto-serving-router compatibility (SPEC §2)', () => {
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
    const dir = mkdtempSync(join(tmpdir(), 'ar-pypto-'));
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
          serve_args: ['--compile-config', '{"graph": true}', "--note", "it's"],
          env: { RECORD_FILE: record, DEVICE: '{device}' },
          launch_wrapper: [process.execPath, RECORDER, '{port}', 'node-d{device}'],
          log_dir: dir,
        },
      ],
    };
    const router = await spawnRouter(['--replicas', writeTempConfig(config), '--initial-replicas', '1', '--health-interval', '0.2'], { ROUTER_ADMIN_TOKEN: TEST_TOKEN });
    procs.push(router);
    await waitFor(async () => (await adminCall(router, 'GET', '/replicas')).body.replicas[0]?.ready, 15_000, 'the wrapped replica to be ready');
    const rec = JSON.parse(readFileSync(record, 'utf8')) as { argv: string[]; env: { DEVICE: string } };
    assert.equal(rec.argv.length, 3, 'the serve command is one argument after the wrapper');
    assert.deepEqual(rec.argv.slice(0, 2), [String(base), 'node-d0']);
    assert.equal(rec.env.DEVICE, '0');
    const words = execFileSync('/bin/sh', ['-c', `printf '%s\\0' ${rec.argv[2]}`], { encoding: 'utf8' }).split('\0').slice(0, -1);
    assert.deepEqual(words, [
      'python3', '-m', 'pypto_serving.cli', '--model', '/models/qwen3 14b', '--devices', '0,1', '--host', '0.0.0.0',
      '--port', String(base), '--show-startup-logs', '--served-model-name', 'qwen3', '--compile-config', '{"graph": true}', '--note', "it's",
    ]);
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
