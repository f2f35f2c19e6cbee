import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { bodyPromptChain, promptChain, PREFIX_BLOCK_CHARS } from './prefix-hash.js';

const blocksOf = (body: unknown): readonly number[] => promptChain(body).blocks;

const chat = (...contents: Array<[string, unknown]>): unknown => ({ model: 'm', messages: contents.map(([role, content]) => ({ role, content })) });

/** Length of the common prefix of two chains. */
function common(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe('prompt block-hash chain', () => {
  it('cuts each message into blocks of at most PREFIX_BLOCK_CHARS, the last one short', () => {
    const long = 'x'.repeat(PREFIX_BLOCK_CHARS * 2 + 10);
    assert.equal(blocksOf(chat(['system', 'short'])).length, 1);
    assert.equal(blocksOf(chat(['system', long])).length, 3);
    assert.equal(blocksOf(chat(['system', 'a'], ['user', 'b'])).length, 2);
  });

  it('gives a conversation re-sent with a new turn the same hashes for every earlier message, short ones too', () => {
    const t1 = chat(['system', 'be brief'], ['user', 'hi']);
    const t2 = chat(['system', 'be brief'], ['user', 'hi'], ['assistant', 'hello'], ['user', 'more']);
    const a = blocksOf(t1);
    const b = blocksOf(t2);
    assert.equal(common(a, b), a.length);
    assert.equal(b.length, 4);
  });

  it('a useful match covers the first turn: system prompts alone are not a conversation', () => {
    const sys = 's'.repeat(PREFIX_BLOCK_CHARS + 1); // two blocks
    assert.equal(promptChain(chat(['system', sys], ['user', 'hi'])).minMatch, 3);
    assert.equal(promptChain(chat(['system', sys], ['developer', 'd'], ['user', 'hi'], ['assistant', 'a'], ['user', 'more'])).minMatch, 4);
    assert.equal(promptChain(chat(['user', 'hi'], ['assistant', 'a'])).minMatch, 1);
    assert.equal(promptChain(chat(['system', 'only'])).minMatch, 1);
    assert.equal(promptChain({ model: 'm', prompt: sys }).minMatch, 1);
  });

  it('chains: a block hash names everything before it (same text after a different start differs)', () => {
    const tail = 'same second message';
    const a = blocksOf(chat(['user', 'first A'], ['user', tail]));
    const b = blocksOf(chat(['user', 'first B'], ['user', tail]));
    assert.notEqual(a[0], b[0]);
    assert.notEqual(a[1], b[1]);
  });

  it('tells roles, models and part boundaries apart', () => {
    assert.notDeepEqual(blocksOf(chat(['user', 'x'])), blocksOf(chat(['assistant', 'x'])));
    assert.notDeepEqual(blocksOf({ model: 'a', prompt: 'x' }), blocksOf({ model: 'b', prompt: 'x' }));
    assert.notDeepEqual(blocksOf(chat(['user', 'ab'])), blocksOf(chat(['user', 'a'], ['user', 'b'])));
    const parts = blocksOf(chat(['user', [{ type: 'text', text: 'ab' }]]));
    const split = blocksOf(
      chat([
        'user',
        [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      ]),
    );
    assert.notDeepEqual(parts, split);
  });

  it('hashes the text parts of an array content and counts the others', () => {
    const img = { type: 'image_url', image_url: { url: 'data:...' } };
    const a = blocksOf(chat(['user', [{ type: 'text', text: 'look' }, img]]));
    const b = blocksOf(chat(['user', [{ type: 'text', text: 'look' }]]));
    assert.equal(a.length, 1);
    assert.notDeepEqual(a, b);
  });

  it('a growing completions prompt shares its full blocks with the previous turn', () => {
    const base = 'p'.repeat(PREFIX_BLOCK_CHARS + 40);
    const a = blocksOf({ model: 'm', prompt: base });
    const b = blocksOf({ model: 'm', prompt: base + ' and more text' });
    assert.equal(a.length, 2);
    assert.equal(common(a, b), 1);
    assert.equal(blocksOf({ model: 'm', prompt: ['one', 'two'] }).length, 2);
    assert.equal(blocksOf({ model: 'm', prompt: [1, 2, 3] }).length, 1, 'a token-id prompt is one prompt');
    assert.notDeepEqual(blocksOf({ model: 'm', prompt: [1, 2, 3] }), blocksOf({ model: 'm', prompt: [1, 2, 4] }));
  });

  it('hashes are non-negative safe integers', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom('system', 'user', 'assistant'), fc.string({ maxLength: 600 })), { maxLength: 6 }), (msgs) => {
        for (const h of blocksOf(chat(...msgs))) assert.ok(Number.isSafeInteger(h) && h >= 0, String(h));
      }),
    );
  });

  it('property: appending messages never changes the chain of the earlier ones', () => {
    const msg = fc.tuple(fc.constantFrom('system', 'user', 'assistant'), fc.string({ maxLength: 700 }));
    fc.assert(
      fc.property(fc.array(msg, { maxLength: 5 }), fc.array(msg, { minLength: 1, maxLength: 3 }), (head, more) => {
        const a = blocksOf(chat(...head));
        const b = blocksOf(chat(...head, ...more));
        assert.equal(common(a, b), a.length);
        assert.ok(b.length > a.length);
      }),
    );
  });

  it('reads a raw body: nothing for non-JSON, no prompt, or a body over the cap', () => {
    const body = Buffer.from(JSON.stringify(chat(['user', 'hello'])));
    assert.deepEqual(bodyPromptChain(body), promptChain(chat(['user', 'hello'])));
    assert.deepEqual(bodyPromptChain(Buffer.from('not json')).blocks, []);
    assert.deepEqual(bodyPromptChain(Buffer.from('{"model":"m"}')).blocks, []);
    assert.deepEqual(bodyPromptChain(Buffer.from('[1,2]')).blocks, []);
    assert.deepEqual(bodyPromptChain(body, body.length - 1).blocks, []);
  });

  it('keeps distinct JSON types distinct and hashes image parts, as the engine sees them (issue 26)', () => {
    const content = (c: unknown) => blocksOf({ model: 'm', messages: [{ role: 'user', content: c }] });
    const kinds = [null, 1, '1', 'null', { a: 1 }, [{ type: 'text', text: '1' }]].map((c) => JSON.stringify(content(c)));
    assert.equal(new Set(kinds).size, kinds.length, 'null, 1, "1", "null", an object and a text part hash apart');
    const image = (url: string) =>
      content([
        { type: 'text', text: 'what is this?' },
        { type: 'image_url', image_url: { url } },
      ]);
    assert.notDeepEqual(image('data:image/png;base64,AAAA'), image('data:image/png;base64,BBBB'), 'different images, same text');
    assert.deepEqual(image('https://x/cat.png'), image('https://x/cat.png'), 'the same image');
  });
});
