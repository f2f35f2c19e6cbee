import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { createAppLogger } from './logger.js';

/** Logs through a real logger into a buffer; resolves with what was written. */
async function written(format: 'json' | 'pretty', write: (log: ReturnType<typeof createAppLogger>) => void, level = 'info'): Promise<string> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  const log = createAppLogger(level, format, out);
  write(log);
  await new Promise((r) => setImmediate(r));
  return Buffer.concat(chunks).toString();
}

const SECRET = 'Bearer s3cr3t-token-value';

describe('createAppLogger', () => {
  it('redacts authorization wherever a caller puts it, in JSON and pretty output', async () => {
    for (const format of ['json', 'pretty'] as const) {
      const text = await written(format, (log) => {
        log.info({ authorization: SECRET }, 'top level');
        log.info({ headers: { authorization: SECRET, 'content-type': 'application/json' } }, 'headers');
        log.info({ req: { headers: { authorization: SECRET } } }, 'request');
        log.warn({ token: 's3cr3t-token-value', adminToken: 's3cr3t-token-value', identity: '-----BEGIN OPENSSH PRIVATE KEY-----' }, 'secrets');
      });
      assert.equal(text.includes('s3cr3t'), false, `${format}: ${text}`);
      assert.equal(text.includes('PRIVATE KEY'), false, `${format}: ${text}`);
      assert.equal(text.split('[redacted]').length - 1, 6, `${format}: six redactions in ${text}`);
      assert.ok(text.includes('application/json'), 'fields next to a redacted one are kept');
    }
  });

  it('writes one JSON object per line with level, time and msg', async () => {
    const text = await written('json', (log) => log.info({ event: 'launch', replica: 'h-d0' }, 'launched'));
    const lines = text.trim().split('\n');
    assert.equal(lines.length, 1);
    const rec = JSON.parse(lines[0]) as Record<string, unknown>;
    assert.equal(rec['event'], 'launch');
    assert.equal(rec['replica'], 'h-d0');
    assert.equal(rec['msg'], 'launched');
    assert.equal(rec['level'], 30);
    assert.equal(typeof rec['time'], 'number');
  });

  it('writes a readable line in pretty mode: time, level, message, key=value', async () => {
    const text = await written('pretty', (log) => log.warn({ replica: 'h-d0', tail: ['a', 'b'] }, 'launch timed out'));
    assert.match(text, /^\d\d:\d\d:\d\d\.\d{3} WARN {2}launch timed out replica=h-d0 tail=\["a","b"\]\n$/);
  });

  it('drops lines under --log-level', async () => {
    const text = await written(
      'json',
      (log) => {
        log.debug('hidden');
        log.info('hidden too');
        log.warn('shown');
      },
      'warn',
    );
    assert.deepEqual(
      text
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { msg: string }).msg),
      ['shown'],
    );
  });
});
