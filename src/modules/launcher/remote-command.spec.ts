import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, realpath, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import {
  buildAliveLine,
  buildIdentifyLine,
  buildLaunchLine,
  buildSignalLine,
  buildStopCommandLine,
  buildTailLine,
  parseAliveOutput,
  parseEchoedPid,
  parseIdentifyOutput,
  quotePath,
} from './remote-command.js';
import { listenerInGroup, killQuietly, processGone, replicaArgv, replicaTempDir, waitFor, waitForReport } from './transports/replica-process.fake.js';

const SHELLS = ['/bin/sh', '/bin/bash'].filter((s) => existsSync(s));
const PATH = process.env.PATH ?? '/usr/bin:/bin';

function run(shell: string, line: string): { code: number | null; signal: string | null; stdout: string; stderr: string } {
  const res = spawnSync(shell, ['-c', line], { encoding: 'utf8', env: { PATH, HOME: process.env.HOME ?? '/root' }, timeout: 20_000 });
  return { code: res.status, signal: res.signal, stdout: res.stdout, stderr: res.stderr };
}

function pgrpOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

describe('remote command builders', () => {
  it('builds the launch line: mkdir of the log dir, cd before nohup, every word quoted, pid echoed', () => {
    const line = buildLaunchLine({
      argv: ['python3', '-m', 'srv', '--model', "o'neil model"],
      env: { CUDA_VISIBLE_DEVICES: '0,1', NOTE: 'a b' },
      logPath: '/var/log/router/node-d0.log',
      workdir: '/opt/my models',
    });
    assert.equal(
      line,
      `mkdir -p "$(dirname '/var/log/router/node-d0.log')" && cd '/opt/my models' && ` +
        `{ setsid nohup env 'CUDA_VISIBLE_DEVICES=0,1' 'NOTE=a b' 'python3' '-m' 'srv' '--model' 'o'\\''neil model' ` +
        `>> '/var/log/router/node-d0.log' 2>&1 < /dev/null & echo $!; }`,
    );
    assert.ok(line.indexOf('cd ') < line.indexOf('nohup'));
    const noWorkdir = buildLaunchLine({ argv: ['x'], env: {}, logPath: '/l.log' });
    assert.equal(noWorkdir, `mkdir -p "$(dirname '/l.log')" && { setsid nohup env 'x' >> '/l.log' 2>&1 < /dev/null & echo $!; }`);
  });

  it('anchors ~ and relative paths at "$HOME" and leaves the rest literal', () => {
    assert.equal(quotePath('/abs/p'), `'/abs/p'`);
    assert.equal(quotePath('~'), '"$HOME"');
    assert.equal(quotePath('~/logs/$x'), `"$HOME"/'logs/$x'`);
    assert.equal(quotePath('rel dir'), `"$HOME"/'rel dir'`);
  });

  it('refuses env names and programs a shell or env would misread', () => {
    assert.throws(() => buildLaunchLine({ argv: ['x'], env: { 'A;B': '1' }, logPath: '/l' }), /env name "A;B"/);
    assert.throws(() => buildLaunchLine({ argv: [], env: {}, logPath: '/l' }), /argv is empty/);
    assert.throws(() => buildLaunchLine({ argv: ['A=1'], env: {}, logPath: '/l' }), /contains '='/);
    assert.throws(() => buildStopCommandLine({ stopArgv: [], env: {} }), /argv is empty/);
  });

  for (const shell of SHELLS) {
    it(`launch line run by ${shell}: argv arrives literally, nothing is injected, the echoed pid leads its own group`, async (t) => {
      const dir = replicaTempDir(t, 'remote-command-');
      const workdir = join(dir, 'work dir; $(x)');
      await mkdir(workdir);
      const pwned = join(tmpdir(), `pwned-${randomBytes(6).toString('hex')}`);
      const evil = `model $(touch ${pwned}); touch ${pwned} \`touch ${pwned}\` 'q' "d" *`;
      const logPath = join(dir, 'new log dir', 'slot.log');
      const line = buildLaunchLine({ argv: replicaArgv(['--model', evil]), env: { LAUNCHER_TEST_FOO: "it's $HOME" }, logPath, workdir });
      const res = run(shell, line);
      assert.equal(res.code, 0, res.stderr);
      const pid = parseEchoedPid(res.stdout);
      assert.ok(pid !== null, `no pid in ${JSON.stringify(res.stdout)}`);
      t.after(() => killQuietly(pid));

      const report = await waitForReport(logPath);
      assert.equal(report.pid, pid, 'the echoed pid is the replica itself, not a subshell');
      assert.equal(pgrpOf(pid), pid, 'the replica leads its own process group');
      assert.deepEqual(report.argv, ['--model', evil]);
      assert.equal(report.foo, "it's $HOME");
      assert.equal(report.cwd, await realpath(workdir));
      assert.equal(existsSync(pwned), false, 'no command substitution ran');
    });

    it(`launch line run by ${shell} fails (non-zero, no pid) when the workdir is missing`, (t) => {
      const dir = replicaTempDir(t, 'remote-command-');
      const res = run(shell, buildLaunchLine({ argv: ['sleep', '30'], env: {}, logPath: join(dir, 'l.log'), workdir: join(dir, 'nope') }));
      assert.notEqual(res.code, 0);
      assert.equal(parseEchoedPid(res.stdout), null);
    });

    it(`stop line run by ${shell}: an exec'd \`pkill -f\` does not kill its own shell`, async (t) => {
      const dir = replicaTempDir(t, 'remote-command-');
      const marker = `stop-marker-${randomBytes(6).toString('hex')}`;
      const launched = run(shell, buildLaunchLine({ argv: replicaArgv([marker]), env: {}, logPath: join(dir, 'r.log') }));
      const pid = parseEchoedPid(launched.stdout);
      assert.ok(pid !== null);
      t.after(() => killQuietly(pid));
      await waitForReport(join(dir, 'r.log'));

      const line = buildStopCommandLine({ stopArgv: ['pkill', '-f', marker], env: { PATH }, workdir: dir });
      assert.equal(line, `cd '${dir}' && exec env 'PATH=${PATH}' 'pkill' '-f' '${marker}'`);
      const res = run(shell, line);
      assert.deepEqual({ code: res.code, signal: res.signal }, { code: 0, signal: null }, res.stderr);
      await waitFor('the replica to be gone', () => processGone(pid));
    });
  }

  it('the same stop without `exec` would kill its own shell (why exec matters)', async (t) => {
    const dir = replicaTempDir(t, 'remote-command-');
    const marker = `stop-marker-${randomBytes(6).toString('hex')}`;
    const launched = run('/bin/sh', buildLaunchLine({ argv: replicaArgv([marker]), env: {}, logPath: join(dir, 'r.log') }));
    const pid = parseEchoedPid(launched.stdout);
    assert.ok(pid !== null);
    t.after(() => killQuietly(pid));
    await waitForReport(join(dir, 'r.log'));
    const naive = run('/bin/sh', `cd '${dir}' && pkill -f '${marker}'`);
    assert.equal(naive.signal, 'SIGTERM', 'pkill matched the shell whose command line holds the pattern');
  });

  for (const shell of SHELLS) {
    it(`alive and signal lines run by ${shell} see and stop a process group`, async (t) => {
      const dir = replicaTempDir(t, 'remote-command-');
      const launched = run(shell, buildLaunchLine({ argv: replicaArgv(['--grandchild']), env: {}, logPath: join(dir, 'r.log') }));
      const pid = parseEchoedPid(launched.stdout);
      assert.ok(pid !== null);
      const report = await waitForReport(join(dir, 'r.log'));
      t.after(() => killQuietly(pid, report.grandchild));

      assert.equal(parseAliveOutput(run(shell, buildAliveLine(pid)).stdout), true);
      assert.equal(run(shell, buildSignalLine(pid, 'TERM')).code, 0);
      await waitFor('the group to be gone', () => processGone(pid) && report.grandchild !== undefined && processGone(report.grandchild));
      // Orphans are reaped by the remote init; until then `kill -0` still sees the zombie.
      await waitFor('the alive line to say gone', () => parseAliveOutput(run(shell, buildAliveLine(pid)).stdout) === false);
      assert.notEqual(run(shell, buildSignalLine(pid, 'KILL')).code, 0, 'signalling a gone group fails');
    });
  }

  it('builds exact signal/alive lines and refuses pids that would hit init or whole groups', () => {
    assert.equal(buildSignalLine(4242, 'TERM'), 'kill -s TERM -- -4242 2>/dev/null || kill -s TERM 4242');
    assert.equal(buildSignalLine(4242, 'KILL'), 'kill -s KILL -- -4242 2>/dev/null || kill -s KILL 4242');
    assert.match(buildAliveLine(4242), /kill -s 0 -- -4242/);
    for (const bad of [0, 1, -1, 1.5, Number.NaN, 2 ** 40]) {
      assert.throws(() => buildSignalLine(bad, 'TERM'), RangeError);
      assert.throws(() => buildAliveLine(bad), RangeError);
    }
  });

  it('tail line prints the last lines and nothing for a missing log', async (t) => {
    const dir = replicaTempDir(t, 'remote-command-');
    const log = join(dir, 'a log');
    await writeFile(log, 'one\ntwo\nthree\n');
    assert.equal(buildTailLine(log, 2), `if [ -e '${log}' ]; then tail -n 2 '${log}'; fi`);
    assert.equal(run('/bin/sh', buildTailLine(log, 2)).stdout, 'two\nthree\n');
    const missing = run('/bin/sh', buildTailLine(join(dir, 'missing'), 5));
    assert.deepEqual([missing.code, missing.stdout], [0, '']);
    assert.throws(() => buildTailLine(log, 0), RangeError);
  });

  it('parses the echoed pid and the alive answer strictly', () => {
    assert.equal(parseEchoedPid('4242\n'), 4242);
    assert.equal(parseEchoedPid('motd line\n4242\n\n'), 4242);
    for (const bad of ['', 'abc', '1', '0', '-5', '12 34', '4242x']) assert.equal(parseEchoedPid(bad), null, bad);
    assert.equal(parseAliveOutput('alive\n'), true);
    assert.equal(parseAliveOutput('gone\n'), false);
    assert.equal(parseAliveOutput('sh: kill: not found'), null);
  });

  it('builds an identity check that proves only the pid (or group) holding the listening socket, in every shell', async (t) => {
    const group = await listenerInGroup(t);
    const { spawn } = await import('node:child_process');
    const sleeper = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    t.after(() => killQuietly(sleeper.pid));
    const done = spawn('true', [], { stdio: 'ignore' });
    await new Promise((r) => done.once('exit', r));
    for (const shell of SHELLS) {
      const answer = (pid: number, port: number) => {
        const res = run(shell, buildIdentifyLine(pid, port));
        assert.equal(res.code, 0, `${shell}: ${res.stderr}`);
        return parseIdentifyOutput(res.stdout);
      };
      assert.equal(answer(group.leader, group.port), 'proven', `${shell}: group leader`);
      assert.equal(answer(group.listener, group.port), 'proven', `${shell}: the listener`);
      assert.equal(answer(sleeper.pid!, group.port), 'other', `${shell}: another process`);
      assert.equal(answer(group.leader, group.closedPort), 'no-listener', `${shell}: nothing on the port`);
      assert.equal(answer(done.pid!, group.port), 'dead', `${shell}: a dead pid`);
    }
    assert.throws(() => buildIdentifyLine(1, 80), RangeError);
    assert.throws(() => buildIdentifyLine(1234, 0), RangeError);
    assert.equal(parseIdentifyOutput('garbage'), null);
  });
});
