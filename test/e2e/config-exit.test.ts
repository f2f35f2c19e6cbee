/**
 * contract §1 exit codes, seen from outside: the real entry point with a bad config or bad flags
 * prints one `error: <path>: <message>` line per problem on stderr and exits 2 on its own,
 * before anything listens.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { killRunning, runNode, type Exit } from '../support/run-node.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

const MAIN = fileURLToPath(new URL('../../src/main.js', import.meta.url));
const DEADLINE_MS = 30_000;

/** Runs main.js with `args` and only PATH plus `env` in its environment. */
function runMain(args: string[], env: Record<string, string> = {}): Promise<Exit> {
  return runNode(MAIN, args, { deadlineMs: DEADLINE_MS, env: { PATH: process.env.PATH ?? '', ...env } });
}

/**
 * Asserts exit code 2, that the router never got as far as listening (no `listening` line, as
 * app.factory.ts logs it in either log format), and that stderr holds `error: <path>: ` lines
 * matching each expectation.
 */
function assertConfigExit(result: Exit, expected: readonly [path: string, message: RegExp][]): void {
  assert.equal(result.code, 2, `exit code; stderr: ${result.stderr}`);
  for (const [name, text] of [
    ['stdout', result.stdout],
    ['stderr', result.stderr],
  ] as const) {
    assert.doesNotMatch(text, /"event":"listening"|affinity-router listening/, `${name} has the listening line`);
  }
  const lines = result.stderr.split('\n').filter((l) => l.startsWith('error: '));
  for (const [path, message] of expected) {
    const line = lines.find((l) => l.startsWith(`error: ${path}: `));
    assert.ok(line, `no "error: ${path}: " line in stderr:\n${result.stderr}`);
    assert.match(line.slice(`error: ${path}: `.length), message);
  }
}

describe('main exits 2 on invalid config or flags', () => {
  const dir = tempDir('config-exit-');
  after(() => killRunning());
  const file = (name: string, content: unknown): string => {
    const path = join(dir, name);
    writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
    return path;
  };
  const good = file('good.json', { replicas: [{ host: '127.0.0.1', port: 1 }] });

  it('names hosts[1].devices_per_replica when it does not divide the devices', async () => {
    const bad = file('dpr.json', {
      hosts: [
        { name: 'a', devices: [0], model: 'm' },
        { name: 'b', ssh: 'gpu@node02', devices: [0, 1, 2, 3, 4, 5, 6, 7], devices_per_replica: 3, model: 'm' },
      ],
    });
    assertConfigExit(await runMain(['--config', bad]), [['hosts[1].devices_per_replica', /^3 does not divide the 8 declared devices$/]]);
  });

  it('names every bad field of the file at once', async () => {
    const bad = file('fields.json', {
      replicas: [
        { host: 'a', port: '8000' },
        { host: 'b', port: 1, scheme: 'ftp' },
      ],
      routing: { session_ttl: 0 },
      extra: 1,
    });
    assertConfigExit(await runMain(['--replicas', bad]), [
      ['replicas[0].port', /got "8000"/],
      ['replicas[1].scheme', /got "ftp"/],
      ['routing.session_ttl', /got 0/],
      ['extra', /unknown field/],
    ]);
  });

  it('names an unknown placeholder at its element path', async () => {
    const bad = file('template.json', { hosts: [{ devices: [0], command: ['serve', '--port', '{port}', '{gpu}'] }] });
    assertConfigExit(await runMain(['--config', bad]), [['hosts[0].command[3]', /^unknown placeholder \{gpu\}/]]);
  });

  it('names an unsafe replica name and an unsafe host name at their paths', async () => {
    const replica = file('unsafe-replica.json', {
      replicas: [
        { host: '127.0.0.1', port: 9000 },
        { name: 'gpu 1/evil', host: '127.0.0.1', port: 9001 },
      ],
    });
    assertConfigExit(await runMain(['--config', replica]), [['replicas[1].name', /^must be 1-64 characters of A-Z a-z 0-9 \. _ : -, got "gpu 1\/evil"/]]);
    const host = file('unsafe-host.json', { hosts: [{ name: 'node$(id)', devices: [0], model: 'm' }] });
    assertConfigExit(await runMain(['--config', host]), [['hosts[0].name', /^must be 1-64 characters of A-Z a-z 0-9 \. _ : -, got "node\$\(id\)"/]]);
  });

  it('exits 2 on an empty replica or host name, naming its path', async () => {
    const replica = file('empty-replica.json', {
      replicas: [
        { host: '127.0.0.1', port: 9000 },
        { name: '', host: '127.0.0.1', port: 9001 },
      ],
    });
    assertConfigExit(await runMain(['--config', replica]), [['replicas[1].name', /^must not be empty/]]);
    const host = file('empty-host.json', { hosts: [{ name: '', devices: [0], model: 'm' }] });
    assertConfigExit(await runMain(['--config', host]), [['hosts[0].name', /^must not be empty/]]);
  });

  it('refuses a static replica named like a generated slot', async () => {
    // Host h, devices [0,1], one device per replica: slots h-d0 and h-d1.
    const clash = file('slot-name.json', {
      hosts: [{ name: 'h', devices: [0, 1], devices_per_replica: 1, port_base: 41000, model: 'm' }],
      replicas: [{ name: 'h-d0', host: '127.0.0.1', port: 9000 }],
    });
    assertConfigExit(await runMain(['--config', clash]), [['replicas[0].name', /"h-d0" is already the name of a device slot of hosts\[0\]/]]);
  });

  it('reports invalid JSON and a missing file at path config, naming the file', async () => {
    assertConfigExit(await runMain(['--config', file('broken.json', '{"replicas": [')]), [['config', /broken\.json" is not valid JSON/]]);
    assertConfigExit(await runMain(['--config', join(dir, 'absent.json')]), [['config', /cannot read ".*absent\.json"/]]);
  });

  it('refuses --request-timeout 0, --connect-timeout -1 and an unknown flag', async () => {
    assertConfigExit(await runMain(['--config', good, '--request-timeout', '0', '--connect-timeout', '-1', '--gpu-count', '2']), [
      ['--request-timeout', /> 0, got "0"/],
      ['--connect-timeout', /> 0, got "-1"/],
      ['--gpu-count', /unknown flag/],
    ]);
  });

  it('refuses a missing --config and a bad env twin', async () => {
    assertConfigExit(await runMain([], { ROUTER_DRAIN_TIMEOUT: 'never' }), [
      ['--config', /required/],
      ['ROUTER_DRAIN_TIMEOUT', /got "never"/],
    ]);
  });

  it('prints the usage and exits 0 for --help', async () => {
    const result = await runMain(['--help']);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /--drain-timeout SECONDS/);
    assert.match(result.stdout, /ROUTER_DRAIN_TIMEOUT/);
  });
});
