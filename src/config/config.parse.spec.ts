/** Config file text → document: JSON and YAML, and where a broken file stops parsing. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parseConfigFile } from './config.parse.js';

/** The one problem of parsing `text` as `name` (fails when it parses). */
function failure(text: string, name = 'r.json'): string {
  const parsed = parseConfigFile(name, () => text);
  if (parsed.ok) assert.fail(`${JSON.stringify(text)} parsed`);
  assert.equal(parsed.problems.length, 1, JSON.stringify(parsed.problems));
  assert.equal(parsed.problems[0].path, 'config');
  return parsed.problems[0].message;
}

/** The offset of 1-based `line`, `column` in `text` (the end of the text when past it). */
function offsetOf(text: string, line: number, column: number): number {
  const lines = text.split('\n');
  return lines.slice(0, line - 1).reduce((sum, l) => sum + l.length + 1, 0) + column - 1;
}

describe('config file parsing', () => {
  it('reads JSON, dropping a leading byte order mark', () => {
    assert.deepEqual(
      parseConfigFile('r.json', () => '\uFEFF{"replicas": []}'),
      { ok: true, document: { replicas: [] } },
    );
  });

  it('reports an unreadable file, naming it', () => {
    const unreadable = parseConfigFile('gone.json', () => {
      throw new Error('ENOENT: no such file or directory');
    });
    assert.deepEqual(unreadable, { ok: false, problems: [{ path: 'config', message: 'cannot read "gone.json": ENOENT: no such file or directory' }] });
  });

  it('gives the line and column of the offset V8 reports', () => {
    assert.match(failure('{\n  "replicas": [],\n}'), /^"r.json" is not valid JSON: .* at position 20 \(line 3, column 1\)$/);
  });

  it('places an unexpected end of the input at the end of the text', () => {
    assert.match(failure('{\n  "replicas": [\n'), /Unexpected end of JSON input \(line 3, column 1\)$/);
  });

  it('takes the place of an unexpected token from the yaml parser when it points at that token', () => {
    assert.match(failure('{\n  "replicas": [\n    {"host": "a", "port": 1},,\n  ]\n}'), /Unexpected token ','.*\(line 3, column 30\)$/);
  });

  it('gives no line and column rather than a wrong one where YAML reads what JSON does not', () => {
    // YAML reads `#` as a comment and `'a'` as a string, then errs elsewhere (the first text: at
    // the `}` of line 4, a line below the fault) or nowhere; V8's message still quotes the text there.
    const texts = ['{\n  "hosts": [\n    {"devices": [0, #1],\n     "model": "m"}\n  ]\n}', '{"replicas": [\n  {"host": \'a\', "port": 1}]}'];
    for (const text of texts) {
      const message = failure(text);
      assert.doesNotMatch(message, /\(line \d+, column \d+\)$/, message);
      assert.match(message, /Unexpected token/);
    }
  });

  it('puts a reported line and column where JSON.parse says the fault is, for any one-character edit of a real config', () => {
    const demo = readFileSync(new URL('../../../config/demo.json', import.meta.url), 'utf8');
    const edit = fc.record({
      at: fc.nat({ max: demo.length }),
      op: fc.constantFrom('insert', 'delete', 'cut'),
      char: fc.constantFrom(...',]}{["\':x1#\n\t /'),
    });
    fc.assert(
      fc.property(edit, ({ at, op, char }) => {
        const text = op === 'insert' ? demo.slice(0, at) + char + demo.slice(at) : op === 'delete' ? demo.slice(0, at) + demo.slice(at + 1) : demo.slice(0, at);
        const parsed = parseConfigFile('r.json', () => text);
        if (parsed.ok) return;
        const message = parsed.problems[0].message;
        const where = /\(line (\d+), column (\d+)\)$/.exec(message);
        if (where === null) return;
        const offset = offsetOf(text, Number(where[1]), Number(where[2]));
        const position = /at position (\d+)/.exec(message)?.[1];
        const token = /JSON: Unexpected token '(.)'/u.exec(message)?.[1];
        if (position !== undefined) assert.equal(offset, Number(position), message);
        else if (token !== undefined) assert.equal(text[offset], token, message);
        else assert.equal(offset, text.length, message);
      }),
      { numRuns: 300, seed: 1 },
    );
  });

  it('reads YAML when the name ends in .yaml or .yml, refusing duplicate keys', () => {
    assert.deepEqual(
      parseConfigFile('r.yml', () => 'replicas:\n  - host: a\n    port: 1\n'),
      { ok: true, document: { replicas: [{ host: 'a', port: 1 }] } },
    );
    assert.match(failure('replicas: []\nreplicas: []\n', 'r.yaml'), /^"r.yaml" is not valid YAML: Map keys must be unique at line 2, column 1$/);
  });

  it('refuses a YAML alias bomb', () => {
    const bomb = [
      'a: &a [x, x, x, x, x, x, x, x, x, x]',
      'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]',
      'c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]',
      'd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]',
    ];
    assert.match(failure(bomb.join('\n'), 'r.yaml'), /^"r.yaml" is not valid YAML: .*alias/i);
  });
});
