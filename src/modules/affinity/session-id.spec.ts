import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { CLIENT_ID } from '../../common/client-id.js';
import { resolveSessionId } from './session-id.js';

describe('resolveSessionId', () => {
  it('keeps a valid header and prefers it over the body', () => {
    assert.deepEqual(resolveSessionId('abc', 'body'), { id: 'abc', source: 'header', replaced: false });
  });

  it('uses the body id when there is no header', () => {
    assert.deepEqual(resolveSessionId(undefined, 'b-1'), { id: 'b-1', source: 'body', replaced: false });
  });

  it('does not let an invalid or empty header hide a valid body id', () => {
    assert.equal(resolveSessionId('bad id', 'good').id, 'good');
    assert.equal(resolveSessionId('', 'good').id, 'good');
  });

  it('replaces an invalid id with h- + 32 hex of sha256 over its bytes, the same every time', () => {
    const bad = 'x'.repeat(300);
    const r = resolveSessionId(bad, undefined);
    assert.equal(r.id, 'h-' + createHash('sha256').update(bad).digest('hex').slice(0, 32));
    assert.equal(r.replaced, true);
    assert.equal(resolveSessionId(bad, undefined).id, r.id);
    assert.match(r.id, CLIENT_ID);
  });

  it('hashes a body id over its UTF-8 bytes', () => {
    const r = resolveSessionId(undefined, 'café au lait');
    assert.equal(r.id, 'h-' + createHash('sha256').update(Buffer.from('café au lait', 'utf8')).digest('hex').slice(0, 32));
  });

  it('mints 32 lowercase hex when there is no id at all', () => {
    const a = resolveSessionId(undefined, undefined);
    const b = resolveSessionId(undefined, undefined);
    assert.match(a.id, /^[0-9a-f]{32}$/);
    assert.equal(a.source, 'minted');
    assert.notEqual(a.id, b.id);
  });
});
