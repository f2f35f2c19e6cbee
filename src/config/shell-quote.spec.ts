import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { shellJoin, shellQuote } from './shell-quote.js';

const SHELLS = ['/bin/sh', '/bin/bash', '/bin/dash'].filter((s) => existsSync(s));

/** The words a real shell sees after parsing `line` (printed NUL-separated by printf). */
function wordsSeenBy(shell: string, line: string): string[] {
  const out = execFileSync(shell, ['-c', `printf '%s\\0' ${line}`], { encoding: 'utf8' });
  return out.split('\0').slice(0, -1);
}

describe('shellQuote', () => {
  it('single-quotes every word, even plain ones, and escapes embedded quotes', () => {
    assert.equal(shellQuote('plain'), `'plain'`);
    assert.equal(shellQuote(''), `''`);
    assert.equal(shellQuote("it's"), `'it'\\''s'`);
    assert.equal(shellQuote('$(touch /tmp/x); rm -rf ~ `id` "a" \\n'), `'$(touch /tmp/x); rm -rf ~ \`id\` "a" \\n'`);
    assert.equal(shellJoin(['a b', "c'd"]), `'a b' 'c'\\''d'`);
  });

  it('refuses NUL, which no argv can carry', () => {
    assert.throws(() => shellQuote('a\0b'), /NUL/);
  });

  for (const shell of SHELLS) {
    it(`round-trips arbitrary words through ${shell} unchanged`, () => {
      const word = fc.string({ unit: 'binary', maxLength: 40 }).map((s) => s.replace(/\0/g, ''));
      fc.assert(
        fc.property(fc.array(word, { minLength: 1, maxLength: 5 }), (words) => {
          assert.deepEqual(wordsSeenBy(shell, shellJoin(words)), words);
        }),
        { numRuns: 60 },
      );
      const nasty = ["'", "''", "'\\''", '$(id)', '`id`', '; echo pwned', '\n', '*', '~', '!', '${HOME}', '"', '\\'];
      assert.deepEqual(wordsSeenBy(shell, shellJoin(nasty)), nasty);
    });
  }
});
