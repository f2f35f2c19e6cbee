/**
 * Finds a top-level string field in a JSON object body without building the document.
 *
 * The scan walks the top-level object only; nested values are skipped by bracket counting
 * (strings honoured), so a 5 MiB chat history costs one linear pass and no allocations. A body
 * that is not a JSON object, or is malformed where the scan looks, has no field (contract §3: malformed
 * JSON is forwarded untouched; only the peek fails silently).
 */

const QUOTE = '"'.charCodeAt(0);
const BACKSLASH = '\\'.charCodeAt(0);
const LBRACE = '{'.charCodeAt(0);
const RBRACE = '}'.charCodeAt(0);
const LBRACKET = '['.charCodeAt(0);
const RBRACKET = ']'.charCodeAt(0);
const COLON = ':'.charCodeAt(0);
const COMMA = ','.charCodeAt(0);

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipWs(b: Uint8Array, i: number): number {
  while (i < b.length && isWs(b[i])) i++;
  return i;
}

/**
 * Index just past the closing quote of the string starting at `i` (b[i] is the quote), or -1. The
 * closing quote is the first one after `i` preceded by an even run of backslashes; each candidate
 * is found by the native byte search, so a long message costs a memchr, not a loop per byte.
 */
function skipString(b: Buffer, i: number): number {
  let q = i;
  for (;;) {
    q = b.indexOf(QUOTE, q + 1);
    if (q < 0) return -1;
    let j = q - 1;
    while (j > i && b[j] === BACKSLASH) j--;
    if ((q - 1 - j) % 2 === 0) return q + 1;
  }
}

/** Index just past the value starting at `i`, or -1 when malformed/truncated. */
function skipValue(b: Buffer, i: number): number {
  const c = b[i];
  if (c === undefined) return -1;
  if (c === QUOTE) return skipString(b, i);
  if (c === LBRACE || c === LBRACKET) {
    let depth = 0;
    while (i < b.length) {
      const d = b[i];
      if (d === QUOTE) {
        i = skipString(b, i);
        if (i < 0) return -1;
        continue;
      }
      if (d === LBRACE || d === LBRACKET) depth++;
      else if (d === RBRACE || d === RBRACKET) {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    return -1;
  }
  // number, true, false, null: up to the next delimiter
  while (i < b.length) {
    const d = b[i];
    if (d === COMMA || d === RBRACE || d === RBRACKET || isWs(d)) break;
    i++;
  }
  return i;
}

/**
 * Returns the decoded value of top-level string field `field`, or undefined when the body is not
 * an object, lacks the field, the field is not a string, or the scan meets malformed JSON.
 * When the field occurs more than once the last occurrence wins, as with JSON.parse. A key spelled
 * with escapes (`"session\u005fid"`) is not recognised: the raw-bytes pre-check skips such bodies.
 */
export function peekTopLevelString(body: Buffer, field: string, fieldNeedle?: Buffer): string | undefined {
  return peekTopLevelStrings(body, [fieldNeedle ?? Buffer.from(JSON.stringify(field))])[0];
}

/** The JSON type of the value starting with byte `c` (the peek reports a non-string `model` by it). */
export type JsonKind = 'string' | 'number' | 'object' | 'array' | 'boolean' | 'null';

function kindOf(c: number | undefined): JsonKind {
  if (c === QUOTE) return 'string';
  if (c === LBRACE) return 'object';
  if (c === LBRACKET) return 'array';
  if (c === 0x74 || c === 0x66) return 'boolean'; // t, f
  if (c === 0x6e) return 'null'; // n
  return 'number';
}

/**
 * Several top-level string fields in one pass (the session id and the `model`, contract §4.3), each
 * given as its JSON-quoted key (`Buffer.from(JSON.stringify(name))`). Entry `k` of the result is
 * what peekTopLevelString would return for needle `k`; a malformed body has none of them.
 *
 * `firstWins[k]` true: the first occurrence of field `k` is enough when its quoted key occurs only
 * once in the bytes. When every field whose key occurs is such a field, the scan stops once they
 * are all found, without reading the rest of the body: a request whose session comes from a
 * header pays for its `model` (the first key of most clients' bodies) only up to that key (plus a
 * byte search for a second occurrence), not a JSON pass over a long chat history. A key that
 * occurs twice (a duplicate, or the same bytes inside a string) means the full scan, so the last
 * duplicate wins as engines read it. The price: a malformed tail after it is not seen (the replica
 * judges that).
 *
 * `kinds`, when given, receives the JSON type of each field's (last) value, so a caller can refuse
 * a field that is present but not a string.
 */
export function peekTopLevelStrings(
  body: Buffer,
  needles: readonly Buffer[],
  firstWins: readonly boolean[] = [],
  kinds?: Array<JsonKind | undefined>,
): Array<string | undefined> {
  const found: Array<string | undefined> = needles.map(() => undefined);
  // Cheap reject: a field whose quoted key is nowhere in the bytes is not looked for.
  const at = needles.map((n) => (body.length > 0 ? body.indexOf(n) : -1));
  const wanted = at.map((i) => i >= 0);
  if (!wanted.includes(true)) return found;
  const early = wanted.every((w, k) => !w || (firstWins[k] === true && body.indexOf(needles[k], at[k] + 1) < 0));
  let left = wanted.filter((w) => w).length;
  const none = (): Array<string | undefined> => {
    if (kinds !== undefined) kinds.length = 0;
    return needles.map(() => undefined);
  };
  let i = skipWs(body, 0);
  if (body[i] !== LBRACE) return none();
  i = skipWs(body, i + 1);
  if (body[i] === RBRACE) return none();
  for (;;) {
    if (body[i] !== QUOTE) return none();
    const keyStart = i;
    const keyEnd = skipString(body, i);
    if (keyEnd < 0) return none();
    let match = -1;
    for (let k = 0; k < needles.length && match < 0; k++) {
      const n = needles[k];
      if (wanted[k] && keyEnd - keyStart === n.length && body.compare(n, 0, n.length, keyStart, keyEnd) === 0) match = k;
    }
    i = skipWs(body, keyEnd);
    if (body[i] !== COLON) return none();
    i = skipWs(body, i + 1);
    const valueStart = i;
    const valueEnd = skipValue(body, i);
    if (valueEnd < 0) return none();
    if (match >= 0) {
      found[match] = body[valueStart] === QUOTE ? decodeJsonString(body, valueStart, valueEnd) : undefined;
      if (kinds !== undefined) kinds[match] = kindOf(body[valueStart]);
      if (early && --left === 0) return found;
    }
    i = skipWs(body, valueEnd);
    if (body[i] === COMMA) {
      i = skipWs(body, i + 1);
      continue;
    }
    if (body[i] === RBRACE) {
      if (skipWs(body, i + 1) !== body.length) return none(); // trailing garbage: not JSON
      return found;
    }
    return none();
  }
}

function decodeJsonString(b: Buffer, start: number, end: number): string | undefined {
  // No escape and no control byte (which JSON refuses): the bytes between the quotes are the value.
  let plain = true;
  for (let i = start + 1; i < end - 1 && plain; i++) plain = b[i] !== BACKSLASH && b[i] >= 0x20;
  if (plain) return b.toString('utf8', start + 1, end - 1);
  try {
    const v: unknown = JSON.parse(b.toString('utf8', start, end));
    return typeof v === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}
