import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { readStateFile, writeStateFile, STATE_VERSION, type StatePin } from './state-file.js';
import { PinEncoder } from './state-pins.js';
import { tempDir } from '../../common/temp-dir.fake.js';

/** Encoded pins in chunks of at most `size` bytes (a chunk is written before the next is made). */
function* encode(pins: readonly StatePin[], size?: number): Generator<Uint8Array> {
  const enc = new PinEncoder(size);
  for (const p of pins) {
    const tail = PinEncoder.tail(p.replica);
    if (!enc.add(p.id, tail)) {
      yield enc.take();
      assert.equal(enc.add(p.id, tail), true);
    }
  }
  if (!enc.empty) yield enc.take();
}

const read = (doc: unknown) => readStateFile('s.json', () => (typeof doc === 'string' ? doc : JSON.stringify(doc)));

describe('state file', () => {
  it('reads a pypto-serving-router file (no version) as version 0', () => {
    const r = read({ replicas: [{ slot: 'local-d0', host: 'local', devices: [0], address: '127.0.0.1', port: 8001 }] });
    assert.equal(r.kind, 'ok');
    if (r.kind === 'ok') {
      assert.equal(r.state.version, 0);
      assert.deepEqual(r.state.replicas[0], {
        slot: 'local-d0',
        host: 'local',
        devices: [0],
        address: '127.0.0.1',
        port: 8001,
        scheme: 'http',
        pid: null,
        launched_at: null,
        model: null,
      });
    }
  });

  it('names the path of every problem, and refuses a newer version', () => {
    const r = read({ version: 1, replicas: [{ slot: '', host: 'h', address: 'a', port: true }], sessions: [{ id: 1 }] });
    assert.equal(r.kind, 'invalid');
    const paths = r.kind === 'invalid' ? r.problems.map((p) => p.path) : [];
    assert.deepEqual(paths, ['--state-file replicas[0].slot', '--state-file replicas[0].port', '--state-file sessions[0]']);
    const future = read({ version: STATE_VERSION + 1 });
    assert.equal(future.kind === 'invalid' && future.problems[0].message.includes('newer router'), true);
    const torn = read('{"version": 1, "replicas": [');
    assert.equal(torn.kind === 'invalid' && torn.problems[0].message.includes('not valid JSON'), true);
  });

  it('reports a missing file as missing, not as an error', () => {
    assert.equal(readStateFile('/nonexistent/dir/state.json').kind, 'missing');
  });

  it('writes atomically: a complete file, no temporary left behind, and a failure leaves the old file whole', async () => {
    const dir = tempDir('ar-state-');
    const p = join(dir, 'nested', 'state.json');
    await writeStateFile(p, { version: 1, epoch: 3, replicas: [] }, encode([{ id: 's', replica: 'r' }]));
    await writeStateFile(p, { version: 1, epoch: 4, replicas: [] });
    const good = readFileSync(p, 'utf8');
    assert.deepEqual(JSON.parse(good), { version: 1, epoch: 4, replicas: [], sessions: [] });
    function* failing(): Generator<Uint8Array> {
      yield* encode([{ id: 'a', replica: 'r' }]);
      throw new Error('encoder failed half-way');
    }
    await assert.rejects(writeStateFile(p, { version: 1, epoch: 5, replicas: [] }, failing()), /half-way/);
    assert.equal(readFileSync(p, 'utf8'), good, 'the previous file is untouched');
    assert.deepEqual(readdirSync(join(dir, 'nested')), ['state.json']);
    await assert.rejects(writeStateFile('/etc/hostname/state.json', { version: 1, epoch: 0, replicas: [] }));
  });

  it('writes pins, whatever their ids, as JSON the reader reads back exactly', async () => {
    const odd = ['plain-id', 'quo"te', 'back\\slash', 'tab\tnew\nline', 'caf\u00e9 \u{1F600}', '\u0000\u001f\u007f', 'lone \ud800', 'x'.repeat(500), ''];
    const pins = [...odd, ...Array.from({ length: 300 }, (_, i) => `s-${i}`)].map((id, i) => ({ id, replica: i % 3 === 0 ? 'r"0' : `r${i % 3}` }));
    const replicas = [
      {
        slot: 'r1',
        host: 'h',
        devices: [0],
        address: '127.0.0.1',
        port: 8001,
        scheme: 'http' as const,
        pid: 12,
        launched_at: '2026-01-01T00:00:00.000Z',
        model: 'm',
      },
    ];
    const p = join(tempDir('ar-state-'), 'state.json');
    await writeStateFile(p, { version: 1, epoch: 7, written_at: '2026-01-02T00:00:00.000Z', replicas }, encode(pins, 64));
    const r = readStateFile(p);
    assert.equal(r.kind, 'ok');
    if (r.kind === 'ok') assert.deepEqual(r.state, { version: 1, epoch: 7, replicas, sessions: pins });
    assert.equal((JSON.parse(readFileSync(p, 'utf8')) as { written_at: string }).written_at, '2026-01-02T00:00:00.000Z');
  });
});
