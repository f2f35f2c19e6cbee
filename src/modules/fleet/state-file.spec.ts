import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readStateFile, writeStateFile, STATE_VERSION } from './state-file.js';

const read = (doc: unknown) => readStateFile('s.json', () => (typeof doc === 'string' ? doc : JSON.stringify(doc)));

describe('state file', () => {
  it('reads a pypto-serving-router file (no version) as version 0', () => {
    const r = read({ replicas: [{ slot: 'local-d0', host: 'local', devices: [0], address: '127.0.0.1', port: 8001 }] });
    assert.equal(r.kind, 'ok');
    if (r.kind === 'ok') {
      assert.equal(r.state.version, 0);
      assert.deepEqual(r.state.replicas[0], { slot: 'local-d0', host: 'local', devices: [0], address: '127.0.0.1', port: 8001, scheme: 'http', pid: null, launched_at: null, model: null });
    }
  });

  it('names the path of every problem, and refuses a newer version', () => {
    const r = read({ version: 1, replicas: [{ slot: '', host: 'h', address: 'a', port: true }], sessions: [{ id: 1 }] });
    assert.equal(r.kind, 'invalid');
    const paths = r.kind === 'invalid' ? r.problems.map((p) => p.path) : [];
    assert.deepEqual(paths, ['--state-file replicas[0].slot', '--state-file replicas[0].port', '--state-file sessions[0]']);
    const future = read({ version: STATE_VERSION + 1 });
    assert.equal(future.kind === 'invalid' && future.problems[0]!.message.includes('newer router'), true);
    const torn = read('{"version": 1, "replicas": [');
    assert.equal(torn.kind === 'invalid' && torn.problems[0]!.message.includes('not valid JSON'), true);
  });

  it('reports a missing file as missing, not as an error', () => {
    assert.equal(readStateFile('/nonexistent/dir/state.json').kind, 'missing');
  });

  it('writes atomically: a complete file, no temporary left behind', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ar-state-'));
    const p = join(dir, 'nested', 'state.json');
    writeStateFile(p, { version: 1, epoch: 3, replicas: [], sessions: [{ id: 's', replica: 'r' }] });
    writeStateFile(p, { version: 1, epoch: 4, replicas: [], sessions: [] });
    assert.equal(JSON.parse(readFileSync(p, 'utf8')).epoch, 4);
    assert.deepEqual(readdirSync(join(dir, 'nested')), ['state.json']);
    assert.throws(() => writeStateFile('/etc/hostname/state.json', { version: 1, epoch: 0, replicas: [], sessions: [] }));
  });
});
