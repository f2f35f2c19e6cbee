import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { checkKnownHosts, fingerprintSha256, hostFieldMatches, keyTypeOfBlob, knownHostsName, readKnownHosts } from './known-hosts.js';
import { ed25519KeyPair } from './ssh-keys.fake.js';
import { tempDir } from '../../../common/temp-dir.fake.js';

const SSH_KEYGEN = ['/usr/bin/ssh-keygen', '/bin/ssh-keygen'].find((p) => existsSync(p));

function newKey(): { line: string; blob: Buffer } {
  const pub = ed25519KeyPair().public; // "ssh-ed25519 AAAA..."
  const [type, b64] = pub.split(' ');
  return { line: `${type} ${b64}`, blob: Buffer.from(b64, 'base64') };
}

describe('known_hosts checking', () => {
  const a = newKey();
  const b = newKey();

  it('names hosts as OpenSSH does: bare on port 22, [host]:port otherwise', () => {
    assert.equal(knownHostsName('Example.COM', 22), 'example.com');
    assert.equal(knownHostsName('10.0.0.5', 2222), '[10.0.0.5]:2222');
    assert.equal(knownHostsName('::1', 2222), '[::1]:2222');
  });

  it('matches plain, comma-listed, [host]:port, wildcard and negated entries; compares type and key bytes', () => {
    const text = ['# comment', '', `gpu1,gpu2.example.com ${a.line}`, `[10.0.0.7]:2222 ${a.line} comment here`, `*.lab,!bad.lab ${a.line}`].join('\n');
    assert.deepEqual(checkKnownHosts(text, 'gpu2.example.com', 22, a.blob), { kind: 'match', line: 3 });
    assert.deepEqual(checkKnownHosts(text, 'GPU1', 22, a.blob), { kind: 'match', line: 3 });
    assert.deepEqual(checkKnownHosts(text, '10.0.0.7', 2222, a.blob), { kind: 'match', line: 4 });
    assert.deepEqual(checkKnownHosts(text, '10.0.0.7', 22, a.blob), { kind: 'unknown' }, 'port 22 does not match a [host]:2222 entry');
    assert.deepEqual(checkKnownHosts(text, 'gpu1', 2222, a.blob), { kind: 'unknown' });
    assert.deepEqual(checkKnownHosts(text, 'x.lab', 22, a.blob), { kind: 'match', line: 5 });
    assert.deepEqual(checkKnownHosts(text, 'bad.lab', 22, a.blob), { kind: 'unknown' });
    assert.deepEqual(checkKnownHosts(text, 'gpu1', 22, b.blob), { kind: 'mismatch', lines: [3], recordedTypes: ['ssh-ed25519'] });
    const wrongType = `gpu1 ssh-rsa ${a.blob.toString('base64')}`;
    assert.equal(checkKnownHosts(wrongType, 'gpu1', 22, a.blob).kind, 'mismatch', 'the recorded type must match the key');
    assert.equal(hostFieldMatches('!gpu1,gpu*', 'gpu1'), false);
  });

  it('honours @revoked and ignores @cert-authority lines', () => {
    const text = [`@cert-authority gpu1 ${a.line}`, `gpu1 ${a.line}`, `@revoked * ${b.line}`].join('\n');
    assert.deepEqual(checkKnownHosts(text, 'gpu1', 22, a.blob), { kind: 'match', line: 2 });
    assert.deepEqual(checkKnownHosts(text, 'gpu1', 22, b.blob), { kind: 'revoked', line: 3 });
    assert.deepEqual(checkKnownHosts(`@cert-authority gpu1 ${a.line}`, 'gpu1', 22, a.blob), { kind: 'unknown' });
  });

  it('reads a missing file as null', async () => {
    assert.equal(await readKnownHosts(join(tmpdir(), `absent-${Date.now()}`, 'known_hosts')), null);
  });

  it('reads the key type from the key itself', () => {
    assert.equal(keyTypeOfBlob(a.blob), 'ssh-ed25519');
    assert.equal(keyTypeOfBlob(Buffer.from([0, 0])), '');
  });

  it(
    'agrees with ssh-keygen on fingerprints and on hashed (|1|salt|hmac) entries',
    { skip: SSH_KEYGEN === undefined && 'ssh-keygen is not installed' },
    async () => {
      const keygen = SSH_KEYGEN ?? 'ssh-keygen';
      const dir = tempDir('known-hosts-');
      const pubFile = join(dir, 'key.pub');
      await writeFile(pubFile, `${a.line}\n`);
      const printed = execFileSync(keygen, ['-l', '-E', 'sha256', '-f', pubFile], { encoding: 'utf8' });
      assert.ok(printed.includes(fingerprintSha256(a.blob)), `${printed} vs ${fingerprintSha256(a.blob)}`);

      const file = join(dir, 'known_hosts');
      await writeFile(file, `[127.0.0.1]:2222 ${a.line}\ngpu9.example.com ${a.line}\n`);
      execFileSync(keygen, ['-H', '-f', file], { stdio: 'ignore' });
      const hashed = await readFile(file, 'utf8');
      assert.ok(hashed.startsWith('|1|') && !hashed.includes('gpu9') && !hashed.includes('127.0.0.1'), hashed);
      assert.equal(checkKnownHosts(hashed, '127.0.0.1', 2222, a.blob).kind, 'match');
      assert.equal(checkKnownHosts(hashed, 'gpu9.example.com', 22, a.blob).kind, 'match');
      assert.equal(checkKnownHosts(hashed, '127.0.0.1', 22, a.blob).kind, 'unknown');
      assert.equal(checkKnownHosts(hashed, 'gpu9.example.com', 22, b.blob).kind, 'mismatch');
    },
  );
});
