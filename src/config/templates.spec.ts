import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HostSpec, SlotSpec } from './router-config.js';
import {
  buildLaunchArgv,
  buildLaunchEnv,
  buildStopArgv,
  expandTemplate,
  findHostTemplateProblems,
  findTemplateProblems,
  templateVars,
  TEMPLATE_PLACEHOLDERS,
} from './templates.js';
import { shellWords } from './shell-words.fake.js';
import { testHost } from './test-host.fake.js';

const host = (over: Partial<HostSpec> = {}): HostSpec =>
  testHost({ name: 'node02', ssh: 'serve@node02', devices: [0, 1, 2, 3], devicesPerReplica: 2, portBase: 9001, model: '/models/dsv4', ...over });
const slot: SlotSpec = { name: 'node02-d2', host: 'node02', devices: [2, 3], port: 9003, address: 'node02', local: false };

describe('template placeholders', () => {
  it('knows exactly the seven placeholders', () => {
    assert.deepEqual([...TEMPLATE_PLACEHOLDERS], ['model', 'served_model_name', 'port', 'device', 'devices', 'host', 'slot']);
  });

  it('accepts every known placeholder and doubled braces', () => {
    assert.deepEqual(findTemplateProblems('{model}{served_model_name}{port}{device}{devices}{host}{slot} {{x}}'), []);
  });

  it('names an unknown placeholder and lists the known ones', () => {
    const [problem, ...rest] = findTemplateProblems('--gpu={gpu}');
    assert.equal(rest.length, 0);
    assert.match(problem, /^unknown placeholder \{gpu\} \(known: \{model\}, \{served_model_name\}, \{port\}/);
  });

  it('reports unbalanced braces with their offset', () => {
    assert.match(findTemplateProblems('a{port')[0], /unbalanced "\{" at offset 1/);
    assert.match(findTemplateProblems('a}b')[0], /unbalanced "\}" at offset 1/);
    assert.match(findTemplateProblems('{{port}')[0], /unbalanced "\}" at offset 6/);
    assert.match(findTemplateProblems('{}')[0], /unknown placeholder \{\}/);
  });

  it('expands placeholders and literal braces', () => {
    const vars = templateVars(host(), slot);
    assert.equal(expandTemplate('{host}/{slot}:{port} d={device} ds={devices} {{"k": 1}}', vars), 'node02/node02-d2:9003 d=2 ds=2,3 {"k": 1}');
    assert.equal(expandTemplate('{served_model_name}', vars), '/models/dsv4', 'served name falls back to the model');
  });

  it('refuses to expand a malformed template', () => {
    assert.throws(() => expandTemplate('{gpu}', templateVars(host(), slot)), /unknown placeholder \{gpu\}/);
  });

  it('reports each bad element of a host at its own path', () => {
    const problems = findHostTemplateProblems(
      host({ command: ['run', '{port}', 'x', '{gpu}'], serveArgs: ['{not-a-template}'], env: { CUDA_VISIBLE_DEVICES: '{cards}' } }),
      'hosts[0]',
    );
    assert.deepEqual(
      problems.map((p) => p.path),
      ['hosts[0].command[3]', 'hosts[0].env.CUDA_VISIBLE_DEVICES'],
    );
    assert.match(problems[0].message, /unknown placeholder \{gpu\}/);
    assert.match(problems[1].message, /\{cards\}/);
  });

  it('refuses {model} on a host that declares no model', () => {
    const problems = findHostTemplateProblems(host({ model: undefined, command: ['serve', '{model}'] }), 'hosts[1]');
    assert.deepEqual(problems, [{ path: 'hosts[1].command[1]', message: 'uses {model} but the host declares no "model"' }]);
  });

  it('reports a NUL byte in any word of the launch argv or env at its path, so no launch can throw on it', () => {
    const problems = findHostTemplateProblems(host({ model: 'm\0', serveArgs: ['ok', 'a\0b'], launchWrapper: ['sh', '-c\0'], env: { A: '\0' } }), 'hosts[0]');
    assert.deepEqual(problems.map((p) => p.path).sort(), ['hosts[0].env.A', 'hosts[0].launch_wrapper[1]', 'hosts[0].model', 'hosts[0].serve_args[1]']);
    assert.match(problems[0].message, /NUL byte/);
  });
});

describe('launch argv', () => {
  /** pypto-serving-router's serve command for `slot` (devices 2,3, port 9003) before the host's own arguments. */
  const DEFAULT_SERVE = 'python3 -m pypto_serving.cli --model /models/dsv4 --devices 2,3 --host 0.0.0.0 --port 9003 --show-startup-logs'.split(' ');

  it('builds pypto-serving-router serve argv by default, serve_args as written', () => {
    assert.deepEqual(buildLaunchArgv(host({ servedModelName: 'dsv4', serveArgs: ['--tp', '{devices}'] }), slot), [
      ...DEFAULT_SERVE,
      '--served-model-name',
      'dsv4',
      '--tp',
      '{devices}',
    ]);
  });

  it('wraps the serve argv as one shell-quoted argument after launch_wrapper', () => {
    const argv = buildLaunchArgv(host({ launchWrapper: ['task-submit', '--dev', '{device}'], serveArgs: ['--note', "it's"] }), slot);
    assert.equal(argv.length, 4);
    assert.deepEqual(argv.slice(0, 3), ['task-submit', '--dev', '2']);
    assert.deepEqual(shellWords(argv[3]), [...DEFAULT_SERVE, '--note', "it's"]);
  });

  it('uses command as the whole argv (serve_args not appended), templated', () => {
    const argv = buildLaunchArgv(host({ command: ['vllm', 'serve', '{model}', '--port', '{port}'], serveArgs: ['--ignored'] }), slot);
    assert.deepEqual(argv, ['vllm', 'serve', '/models/dsv4', '--port', '9003']);
  });

  it('never templates plain values such as the model path', () => {
    assert.equal(buildLaunchArgv(host({ model: '/m/{weird}' }), slot)[4], '/m/{weird}');
  });

  it('expands stop_command, or leaves stopping to the launcher', () => {
    assert.deepEqual(buildStopArgv(host({ stopCommand: ['pkill', '-f', 'serve.*--port {port}( |$)'] }), slot), ['pkill', '-f', 'serve.*--port 9003( |$)']);
    assert.equal(buildStopArgv(host(), slot), undefined);
  });
});

describe('launch env', () => {
  it('strips every ROUTER_ variable, keeps the rest, adds the templated host env', () => {
    const env = buildLaunchEnv(host({ env: { ASCEND_RT_VISIBLE_DEVICES: '{devices}', PATH: '/opt/bin' } }), slot, {
      PATH: '/usr/bin',
      HOME: '/home/serve',
      ROUTER_ADMIN_TOKEN: 's3cret',
      ROUTER_PORT: '8000',
      UNSET: undefined,
    });
    assert.deepEqual(env, { PATH: '/opt/bin', HOME: '/home/serve', ASCEND_RT_VISIBLE_DEVICES: '2,3' });
  });
});
