/** Config-file rules for `hosts[i]` (contract §2): one test per rule, exact path, value named. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, type ConfigProblem } from './config-error.js';
import { loadRouterConfig } from './config.loader.js';
import type { RouterConfig } from './router-config.js';
import { buildLaunchArgv } from './templates.js';

type Json = Record<string, unknown>;
const host = (over: Json = {}): Json => ({ name: 'node', devices: [0, 1], model: '/models/m', ...over });

function load(file: Json, readLog: string[] = []): RouterConfig {
  const readFile = (p: string): string => {
    readLog.push(p);
    if (p !== 'router.json') throw new Error(`ENOENT: ${p}`);
    return JSON.stringify(file);
  };
  return loadRouterConfig(['--config', 'router.json'], { HOME: '/home/op' }, { readFile });
}

function problems(file: Json): ConfigProblem[] {
  try {
    load(file);
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  assert.fail('expected a ConfigError');
}

function rejects(hostOver: Json, path: string, message: RegExp): void {
  const found = problems({ hosts: [host(hostOver)] });
  assert.deepEqual(
    found.map((p) => p.path),
    [path],
    JSON.stringify(found),
  );
  assert.match(found[0].message, message);
}

describe('config file: hosts', () => {
  it('fills host defaults', () => {
    const [h] = load({ hosts: [host()] }).hosts;
    assert.deepEqual(
      {
        ssh: h.ssh,
        sshPort: h.sshPort,
        dpr: h.devicesPerReplica,
        portBase: h.portBase,
        python: h.python,
        logDir: h.logDir,
        insecure: h.insecureAcceptHostKey,
        serveArgs: h.serveArgs,
        env: h.env,
      },
      { ssh: null, sshPort: 22, dpr: 1, portBase: 8001, python: 'python3', logDir: '/tmp/affinity-router', insecure: false, serveArgs: [], env: {} },
    );
  });

  it('takes ssh as user@host, host, user@[v6], v6, or null for local', () => {
    const config = load({
      hosts: [
        host({ name: 'a', ssh: 'gpu@node02' }),
        host({ name: 'b', ssh: 'node03' }),
        host({ name: 'c', ssh: 'ops@[fd00::1]' }),
        host({ name: 'd', ssh: 'fd00::2' }),
        host({ name: 'e', ssh: null }),
      ],
    });
    assert.deepEqual(
      config.hosts.map((h) => h.ssh),
      ['gpu@node02', 'node03', 'ops@[fd00::1]', 'fd00::2', null],
    );
    assert.deepEqual(
      config.slots.filter((s) => s.devices[0] === 0).map((s) => s.address),
      ['127.0.0.1', 'node02', 'node03', 'fd00::1', 'fd00::2'],
    );
  });

  it('refuses a malformed ssh destination', () => {
    rejects({ ssh: 'node02:22' }, 'hosts[0].ssh', /user@host, host or null .*ssh_port.*got "node02:22"/);
    rejects({ ssh: '@node02' }, 'hosts[0].ssh', /user part is not valid: got "@node02"/);
    rejects({ ssh: '' }, 'hosts[0].ssh', /non-empty string, got ""/);
    rejects({ ssh: 22 }, 'hosts[0].ssh', /got 22/);
  });

  it('takes ssh_port 1..65535', () => {
    rejects({ ssh: 'n', ssh_port: 0 }, 'hosts[0].ssh_port', /integer in 1\.\.65535, got 0/);
    assert.equal(load({ hosts: [host({ ssh: 'n', ssh_port: 2222 })] }).hosts[0].sshPort, 2222);
  });

  it('requires non-empty strings for identity_file, known_hosts, workdir, log_dir, python, served_model_name', () => {
    for (const field of ['identity_file', 'known_hosts', 'workdir', 'log_dir', 'python', 'served_model_name']) {
      rejects({ [field]: '' }, `hosts[0].${field}`, /non-empty string, got ""/);
      rejects({ [field]: 7 }, `hosts[0].${field}`, /got 7/);
    }
  });

  it('keeps identity_file as a path (expanding ~/) and never reads it', () => {
    const reads: string[] = [];
    const config = load({ hosts: [host({ ssh: 'n', identity_file: '~/.ssh/id_ed25519', known_hosts: '/etc/kh' })] }, reads);
    assert.equal(config.hosts[0].identityFile, '/home/op/.ssh/id_ed25519');
    assert.equal(config.hosts[0].knownHosts, '/etc/kh');
    assert.deepEqual(reads, ['router.json']);
  });

  it('takes insecure_accept_host_key as a boolean, default false, with a warning when set', () => {
    rejects({ insecure_accept_host_key: 1 }, 'hosts[0].insecure_accept_host_key', /true or false, got 1/);
    const config = load({ hosts: [host({ ssh: 'n', insecure_accept_host_key: true })] });
    assert.ok(config.warnings.some((w) => w.startsWith('hosts[0].insecure_accept_host_key:')));
  });

  it('requires devices: a non-empty array of unique non-negative integers', () => {
    rejects({ devices: [] }, 'hosts[0].devices', /non-empty array of device ids, got \[\]/);
    rejects({ devices: undefined }, 'hosts[0].devices', /got nothing/);
    rejects({ devices: [0, -1] }, 'hosts[0].devices', /element \[1\] is -1/);
    rejects({ devices: [0, true] }, 'hosts[0].devices', /element \[1\] is true/);
    rejects({ devices: [0, '1'] }, 'hosts[0].devices', /element \[1\] is "1"/);
    rejects({ devices: [3, 1, 3] }, 'hosts[0].devices', /device id 3 is declared more than once/);
  });

  it('requires devices_per_replica to be an integer >= 1', () => {
    rejects({ devices_per_replica: 0 }, 'hosts[0].devices_per_replica', /integer >= 1, got 0/);
    rejects({ devices_per_replica: '2' }, 'hosts[0].devices_per_replica', /got "2"/);
  });

  it('requires devices_per_replica to divide the devices, naming both numbers', () => {
    const found = problems({ hosts: [host({ name: 'a' }), host({ name: 'b', devices: [0, 1, 2, 3, 4, 5, 6, 7], devices_per_replica: 3, port_base: 9001 })] });
    assert.deepEqual(found, [{ path: 'hosts[1].devices_per_replica', message: '3 does not divide the 8 declared devices' }]);
  });

  it('requires port_base to be an integer that keeps every slot port in 1..65535', () => {
    rejects({ port_base: '8001' }, 'hosts[0].port_base', /integer .*got "8001"/);
    rejects({ port_base: 65535 }, 'hosts[0].port_base', /slot node-d1 on port 65536, outside 1\.\.65535/);
  });

  it('refuses two slots on the same address and port', () => {
    const found = problems({ hosts: [host({ name: 'a' }), host({ name: 'b', devices: [1] })] });
    assert.deepEqual(
      found.map((p) => p.path),
      ['hosts[1].port_base'],
    );
    assert.match(found[0].message, /slot b-d1 on 127\.0\.0\.1:8002, already used by slot a-d1/);
  });

  it('refuses a static replica on the address and port of a slot', () => {
    const found = problems({ replicas: [{ host: 'localhost', port: 8002 }], hosts: [host()] });
    assert.deepEqual(found, [{ path: 'replicas[0].port', message: '8002 on localhost is where slot node-d1 listens' }]);
  });

  it('requires model unless the host has its own command', () => {
    rejects({ model: undefined }, 'hosts[0].model', /required unless the host has its own "command"/);
    rejects({ model: '' }, 'hosts[0].model', /non-empty string/);
    assert.equal(load({ hosts: [host({ model: undefined, command: ['serve', '--port', '{port}'] })] }).hosts[0].model, undefined);
  });

  it('requires serve_args and launch_wrapper to be arrays of strings', () => {
    rejects({ serve_args: '--x' }, 'hosts[0].serve_args', /array of strings, got "--x"/);
    rejects({ launch_wrapper: ['a', 1] }, 'hosts[0].launch_wrapper', /element \[1\] is 1/);
  });

  it('requires command and stop_command to be non-empty arrays of strings', () => {
    rejects({ command: [] }, 'hosts[0].command', /must not be empty/);
    rejects({ stop_command: ['kill', 9] }, 'hosts[0].stop_command', /element \[1\] is 9/);
    rejects({ command: [''] }, 'hosts[0].command', /element \[0\] \(the program\) must not be empty/);
  });

  it('requires env to map valid variable names to strings', () => {
    rejects({ env: ['A=1'] }, 'hosts[0].env', /object of NAME: "value" strings, got \["A=1"\]/);
    rejects({ env: { '1BAD': 'x' } }, 'hosts[0].env', /variable name "1BAD" is not valid/);
    rejects({ env: { GOOD: 1 } }, 'hosts[0].env', /value of GOOD must be a string, got 1/);
  });

  it('reports unknown placeholders at load, at the element path', () => {
    rejects({ command: ['serve', '--port', '{port}', '{gpu}'] }, 'hosts[0].command[3]', /^unknown placeholder \{gpu\} \(known: \{model\}, /);
    rejects({ launch_wrapper: ['submit', '{card}'] }, 'hosts[0].launch_wrapper[1]', /\{card\}/);
    rejects({ stop_command: ['pkill', '{pid}'] }, 'hosts[0].stop_command[1]', /\{pid\}/);
    rejects({ env: { CUDA_VISIBLE_DEVICES: '{gpus}' } }, 'hosts[0].env.CUDA_VISIBLE_DEVICES', /\{gpus\}/);
  });

  it('passes serve_args literally, as pypto-serving-router did: JSON braces need no escaping', () => {
    const config = load({ hosts: [host({ serve_args: ['--cfg', '{"a": 1}', '{port'] })] });
    assert.deepEqual(buildLaunchArgv(config.hosts[0], config.slots[0]).slice(-3), ['--cfg', '{"a": 1}', '{port']);
  });

  it('warns that serve_args are unused next to a command', () => {
    const config = load({ hosts: [host({ command: ['serve'], serve_args: ['--x'] })] });
    assert.ok(config.warnings.some((w) => w.startsWith('hosts[0].serve_args: ignored')));
  });
});
