/**
 * POSIX shell quoting, for the two places a shell parses words from config: the ssh launcher's
 * remote command lines and the `launch_wrapper` argument. Every word is single-quoted, so no
 * character inside it is special to any POSIX shell (nor to zsh, which expands a bare `=word`):
 * `it's` becomes `'it'\''s'`, the empty word becomes `''`.
 */

/** Quote one word for a POSIX shell. NUL cannot be passed in argv and is refused. */
export function shellQuote(word: string): string {
  if (word.includes('\0')) {
    throw new TypeError('cannot quote a shell word that contains a NUL byte');
  }
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Quote every word and join them with single spaces. */
export function shellJoin(words: readonly string[]): string {
  return words.map(shellQuote).join(' ');
}
