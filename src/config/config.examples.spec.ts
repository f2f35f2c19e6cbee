/** The shipped example configs, and pypto-serving-router compatibility of the config file. */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { shellJoin } from './shell-quote.js';
import { loadRouterConfig } from './config.loader.js';
import type { HostSpec, RouterConfig } from './router-config.js';
import { buildLaunchArgv, buildLaunchEnv } from './templates.js';
import { shellWords } from './shell-words.fake.js';

/** `config/` of the repository (this file runs as dist-test/src/config/*.spec.js). */
const CONFIG_DIR = fileURLToPath(new URL('../../../config/', import.meta.url));

const loadExample = (name: string): RouterConfig => loadRouterConfig(['--config', `${CONFIG_DIR}${name}`], { HOME: '/home/op' });
const hostNamed = (config: RouterConfig, name: string): HostSpec => {
  const host = config.hosts.find((h) => h.name === name);
  assert.ok(host, `host ${name}`);
  return host;
};

describe('example configs', () => {
  const files = readdirSync(CONFIG_DIR).filter((f) => /\.(json|ya?ml)$/.test(f));

  it('ships the documented examples', () => {
    for (const name of ['static.json', 'ssh.json', 'vllm.json', 'pypto.json', 'sim-fleet.json']) assert.ok(files.includes(name), name);
  });

  for (const file of files) {
    it(`loads config/${file} without error`, () => {
      const config = loadExample(file);
      assert.ok(config.replicas.length + config.hosts.length > 0);
    });
  }

  it('static.json declares 3 static replicas', () => {
    assert.equal(loadExample('static.json').replicas.length, 3);
  });

  it('sim-fleet.json launches the simulator on 3 local slots from 18001', () => {
    const config = loadExample('sim-fleet.json');
    assert.deepEqual(
      config.slots.map((s) => [s.name, s.port, s.address]),
      [
        ['local-d0', 18001, '127.0.0.1'],
        ['local-d1', 18002, '127.0.0.1'],
        ['local-d2', 18003, '127.0.0.1'],
      ],
    );
    assert.deepEqual(buildLaunchArgv(hostNamed(config, 'local'), config.slots[1]), [
      'node',
      'dist/sim/replica.js',
      '--port',
      '18002',
      '--name',
      'local-d1',
      '--model',
      'sim-model',
      '--devices',
      '1',
    ]);
  });

  it('vllm.json runs vllm serve with CUDA_VISIBLE_DEVICES set to the slot devices', () => {
    const config = loadExample('vllm.json');
    const host = config.hosts[0];
    const slot = config.slots[2];
    assert.deepEqual(buildLaunchArgv(host, slot).slice(0, 5), ['vllm', 'serve', host.model, '--port', String(slot.port)]);
    assert.equal(buildLaunchEnv(host, slot, {}).CUDA_VISIBLE_DEVICES, '2');
  });
});

describe('pypto-serving-router config file', () => {
  it('loads config/pypto.json unchanged (only replicas and hosts; ssh null; {device} in env)', () => {
    const raw = JSON.parse(readFileSync(`${CONFIG_DIR}pypto.json`, 'utf8')) as Record<string, unknown>;
    assert.deepEqual(Object.keys(raw).sort(), ['hosts', 'replicas']);
    const config = loadExample('pypto.json');
    assert.deepEqual(
      config.slots.map((s) => s.name),
      ['local-d0', 'local-d1', 'node02-d0', 'node02-d2'],
    );
    assert.equal(buildLaunchEnv(hostNamed(config, 'local'), config.slots[1], {}).ASCEND_RT_VISIBLE_DEVICES, '1');
  });

  it('produces the reference argv: --devices 0,1, one quoted wrapper argument, --served-model-name then serve_args', () => {
    const config = loadExample('pypto.json');
    const node02 = hostNamed(config, 'node02');
    const argv = buildLaunchArgv(node02, config.slots[2]);
    // The serve command of shared/reference/pypto-serving-router.md's example, word by word.
    const serve =
      '/opt/venv/bin/python -m pypto_serving.cli --model /models/deepseek-v4 --devices 0,1 --host 0.0.0.0 --port 9001 --show-startup-logs --served-model-name deepseek-v4 --max-batch-size 8 --log-level info';
    assert.deepEqual(argv, ['task-submit', '--device', '0,1', '--', shellJoin(serve.split(' '))]);
  });

  it('quotes the wrapped serve argv so a shell splits it back exactly', () => {
    const config = loadRouterConfig(
      ['--replicas', 'p.json'],
      {},
      {
        readFile: () =>
          JSON.stringify({
            hosts: [
              {
                name: 'n',
                ssh: 'u@n',
                devices: [0, 1, 2, 3, 4, 5, 6, 7],
                devices_per_replica: 8,
                model: '/m/with space',
                served_model_name: "it's",
                serve_args: ['--cfg', '{"graph": true}', '--empty', ''],
                launch_wrapper: ['sh', '-c', 'printf "%s\\n" $0', '{device}'],
              },
            ],
          }),
      },
    );
    const argv = buildLaunchArgv(config.hosts[0], config.slots[0]);
    assert.equal(argv.length, 5);
    const words = shellWords(argv[4]);
    assert.deepEqual(words, [
      'python3',
      '-m',
      'pypto_serving.cli',
      '--model',
      '/m/with space',
      '--devices',
      '0,1,2,3,4,5,6,7',
      '--host',
      '0.0.0.0',
      '--port',
      '8001',
      '--show-startup-logs',
      '--served-model-name',
      "it's",
      '--cfg',
      '{"graph": true}',
      '--empty',
      '',
    ]);
  });
});
