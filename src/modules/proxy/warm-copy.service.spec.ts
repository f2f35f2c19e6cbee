import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { warmBody } from './warm-copy.service.js';

const parse = (b: Buffer | undefined): unknown => (b === undefined ? undefined : JSON.parse(b.toString('utf8')));

describe('warm hand-off copy body', () => {
  it('keeps the prompt and asks for one token without a stream', () => {
    const body = {
      model: 'm',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ],
      stream: true,
      stream_options: { include_usage: true },
      max_completion_tokens: 300,
      n: 3,
      temperature: 0.2,
    };
    assert.deepEqual(parse(warmBody(Buffer.from(JSON.stringify(body)))), {
      model: 'm',
      messages: body.messages,
      stream: false,
      max_tokens: 1,
      n: 1,
      temperature: 0.2,
    });
    assert.deepEqual(parse(warmBody(Buffer.from('{"prompt":"a b c","max_tokens":50}'))), { prompt: 'a b c', max_tokens: 1, stream: false });
  });

  it('is undefined for a body that is not a JSON object', () => {
    for (const text of ['', 'not json', '[1,2]', 'null', '"text"']) assert.equal(warmBody(Buffer.from(text)), undefined, text);
  });
});
