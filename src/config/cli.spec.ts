/** loadConfigOrExit seen from outside: a child process, its exit code, stdout and stderr. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { tempDir } from '../common/temp-dir.fake.js';

const CLI = new URL('./cli.js', import.meta.url).href;
const SCRIPT = `import { loadConfigOrExit } from ${JSON.stringify(CLI)};
const config = loadConfigOrExit(process.argv.slice(1), process.env);
process.stdout.write('loaded ' + config.replicas.length + '\\n');`;

function run(args: string[], env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', SCRIPT, '--', ...args], {
    encoding: 'utf8',
    timeout: 30_000,
    env: { PATH: process.env.PATH ?? '', ...env },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('loadConfigOrExit', () => {
  const dir = tempDir('cli-spec-');
  const good = join(dir, 'good.json');
  const bad = join(dir, 'bad.json');
  writeFileSync(good, JSON.stringify({ replicas: [{ host: '127.0.0.1', port: 8001 }] }));
  writeFileSync(bad, JSON.stringify({ replicas: [{ host: '127.0.0.1', port: '8001' }], hosts: [{ devices: [0, 1, 2], devices_per_replica: 2, model: 'm' }] }));

  it('returns the config when it is valid', () => {
    const { code, stdout, stderr } = run(['--config', good]);
    assert.equal(stderr, '');
    assert.equal(stdout, 'loaded 1\n');
    assert.equal(code, 0);
  });

  it('prints every problem as an error line on stderr and exits 2', () => {
    const { code, stdout, stderr } = run(['--config', bad, '--request-timeout', '0']);
    assert.equal(code, 2);
    assert.equal(stdout, '');
    assert.equal(
      stderr,
      [
        'error: replicas[0].port: must be an integer in 1..65535, got "8001"',
        'error: hosts[0].devices_per_replica: 2 does not divide the 3 declared devices',
        'error: --request-timeout: must be a number of seconds > 0, got "0"',
        '',
      ].join('\n'),
    );
  });

  it('exits 2 naming an env variable with a bad value', () => {
    const { code, stderr } = run(['--config', good], { ROUTER_CONNECT_TIMEOUT: '-1' });
    assert.equal(code, 2);
    assert.equal(stderr, 'error: ROUTER_CONNECT_TIMEOUT: must be a number of seconds > 0, got "-1"\n');
  });

  it('prints the usage on stdout and exits 0 for --help, even with other problems', () => {
    const { code, stdout, stderr } = run(['--bogus', '--help']);
    assert.equal(code, 0);
    assert.equal(stderr, '');
    assert.match(stdout, /^Usage: /);
    assert.match(stdout, /--drain-timeout SECONDS\n.*ROUTER_DRAIN_TIMEOUT/);
  });
});
