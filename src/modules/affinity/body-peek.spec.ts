import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { peekTopLevelString, peekTopLevelStrings, type JsonKind } from './body-peek.js';

const peek = (s: string | Buffer, f = 'session_id'): string | undefined => peekTopLevelString(typeof s === 'string' ? Buffer.from(s) : s, f);

describe('peekTopLevelString', () => {
  it('finds a top-level string field', () => {
    assert.equal(peek('{"model":"m","session_id":"abc","messages":[{"role":"user","content":"hi"}]}'), 'abc');
  });

  it('ignores the field inside nested objects and arrays', () => {
    assert.equal(peek('{"messages":[{"session_id":"nested"}],"meta":{"session_id":"x"}}'), undefined);
  });

  it('ignores the field name appearing inside a string value', () => {
    assert.equal(peek('{"content":"\\"session_id\\":\\"fake\\"","session_id":"real"}'), 'real');
    assert.equal(peek('{"content":"{\\"session_id\\":\\"fake\\"}"}'), undefined);
  });

  it('returns undefined for a non-string value, malformed JSON, non-objects and empty bodies', () => {
    assert.equal(peek('{"session_id":42}'), undefined);
    assert.equal(peek('{"session_id":null}'), undefined);
    assert.equal(peek('{"session_id":"abc"'), undefined);
    assert.equal(peek('{"session_id":"abc"} trailing'), undefined);
    assert.equal(peek('["session_id","abc"]'), undefined);
    assert.equal(peek(''), undefined);
    assert.equal(peek('not json "session_id"'), undefined);
  });

  it('decodes escapes and unicode in the value', () => {
    assert.equal(peek('{"session_id":"a\\u00e9\\n"}'), 'a\u00e9\n');
    assert.equal(peek('{"session_id":"日本"}'), '日本');
  });

  it('does not see a key spelled with escapes (documented); the last duplicate wins (as JSON.parse)', () => {
    assert.equal(peek('{"session\\u005fid":"esc"}'), undefined);
    assert.equal(peek('{"session_id":"first","session_id":"second"}'), 'second');
  });

  it('agrees with JSON.parse on arbitrary objects', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.oneof(fc.constant('session_id'), fc.string()), fc.jsonValue()), fc.boolean(), (obj, pretty) => {
        const text = JSON.stringify(obj, null, pretty ? 2 : undefined);
        const parsed = JSON.parse(text) as Record<string, unknown>;
        const expected = typeof parsed['session_id'] === 'string' ? parsed['session_id'] : undefined;
        assert.equal(peek(text), expected);
      }),
      { numRuns: 500 },
    );
  });
});

describe('peekTopLevelStrings (session id and model in one pass)', () => {
  const needles = [Buffer.from('"session_id"'), Buffer.from('"model"')];
  // As the router asks: the session field exactly (last wins), the first `model` enough.
  const peekBoth = (s: string): Array<string | undefined> => peekTopLevelStrings(Buffer.from(s), needles, [false, true]);

  it('finds both fields, either one alone, or neither', () => {
    assert.deepEqual(peekBoth('{"model":"m1","messages":[{"model":"nested"}],"session_id":"s"}'), ['s', 'm1']);
    assert.deepEqual(peekBoth('{"model":"m1"}'), [undefined, 'm1']);
    assert.deepEqual(peekBoth('{"session_id":"s","model":7}'), ['s', undefined]);
    assert.deepEqual(peekBoth('{"model":"m1","session_id":"s"'), [undefined, undefined]);
    assert.deepEqual(peekBoth('not json'), [undefined, undefined]);
  });

  it('stops at the first model when no session field is in the body, and reads to the end when one is', () => {
    assert.deepEqual(peekBoth('{"model":"m1","messages":[unparsed tail'), [undefined, 'm1']);
    assert.deepEqual(peekBoth('{"model":"m1","session_id":"s","messages":[unparsed tail'), [undefined, undefined]);
    assert.deepEqual(peekTopLevelStrings(Buffer.from('{"model":"m1","x":[unparsed tail'), needles), [undefined, undefined], 'exact by default');
  });

  it('agrees with JSON.parse on arbitrary objects, for both fields', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.oneof(fc.constant('session_id'), fc.constant('model'), fc.string()), fc.jsonValue()), (obj) => {
        const text = JSON.stringify(obj);
        const parsed = JSON.parse(text) as Record<string, unknown>;
        const str = (k: string): string | undefined => (typeof parsed[k] === 'string' ? parsed[k] : undefined);
        assert.deepEqual(peekBoth(text), [str('session_id'), str('model')]);
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with JSON.parse where strings are runs of backslashes, quotes and control characters', () => {
    // Every value, key and nested string made of the characters that end or escape a JSON string.
    const tricky = fc.string({ unit: fc.constantFrom('\\', '"', 'a', '\n', '\u0001', 'é', '\\\\') });
    const value = fc.oneof(tricky, fc.array(tricky), fc.dictionary(tricky, tricky));
    fc.assert(
      fc.property(fc.dictionary(fc.oneof(fc.constant('session_id'), fc.constant('model'), tricky), value), (obj) => {
        const text = JSON.stringify(obj);
        const parsed = JSON.parse(text) as Record<string, unknown>;
        const str = (k: string): string | undefined => (typeof parsed[k] === 'string' ? parsed[k] : undefined);
        assert.deepEqual(peekBoth(text), [str('session_id'), str('model')]);
      }),
      { numRuns: 1000 },
    );
  });

  it('takes the last of a duplicated key even when the first would do, as engines read it (issue 26)', () => {
    const needles = [Buffer.from('"session_id"'), Buffer.from('"model"')];
    const dup = Buffer.from('{"model":"a","messages":[],"model":"b"}');
    assert.deepEqual(peekTopLevelStrings(dup, needles, [false, true]), [undefined, 'b']);
    assert.deepEqual(peekTopLevelStrings(Buffer.from('{"model":"a","messages":[]}'), needles, [false, true]), [undefined, 'a']);
  });

  it("reports the JSON type of each field it finds, the last duplicate's, and none for a malformed body", () => {
    const needles = [Buffer.from('"model"')];
    for (const [v, kind] of [
      ['1.5', 'number'],
      ['[]', 'array'],
      ['{"x":1}', 'object'],
      ['null', 'null'],
      ['true', 'boolean'],
      ['"m"', 'string'],
    ]) {
      const kinds: Array<JsonKind | undefined> = [];
      peekTopLevelStrings(Buffer.from(`{"model":"first","model":${v}}`), needles, [], kinds);
      assert.deepEqual(kinds, [kind], v);
    }
    const kinds: Array<JsonKind | undefined> = [];
    peekTopLevelStrings(Buffer.from('{"model":5,"x":'), needles, [], kinds);
    assert.deepEqual(kinds, []);
  });
});
