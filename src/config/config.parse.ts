/**
 * Config file text → document: YAML when the name ends in `.yaml`/`.yml`, else JSON. A file that
 * cannot be read or parsed is one problem at path `config` naming the file, with the line and
 * column the parsers report. Nothing is validated here (config.validate.ts does that).
 */
import { LineCounter, parseDocument } from 'yaml';
import type { ConfigProblem } from './config-error.js';

/** A 1-based line and column, as the `yaml` package reports them. */
type Position = { readonly line: number; readonly col: number };

/** The parsed document, or why there is none. */
export type ParsedConfigFile = { readonly ok: true; readonly document: unknown } | { readonly ok: false; readonly problems: ConfigProblem[] };

/** Reads `path` with `readFile` and parses it (a leading byte order mark is dropped). */
export function parseConfigFile(path: string, readFile: (p: string) => string): ParsedConfigFile {
  let text: string;
  try {
    text = readFile(path).replace(/^\uFEFF/, '');
  } catch (error) {
    return failed(`cannot read ${JSON.stringify(path)}: ${errorText(error)}`);
  }
  return /\.ya?ml$/i.test(path) ? parseYaml(JSON.stringify(path), text) : parseJson(JSON.stringify(path), text);
}

/** YAML 1.2 with unique keys and at most 100 alias expansions (no billion laughs). */
function parseYaml(name: string, text: string): ParsedConfigFile {
  const doc = parseDocument(text, { uniqueKeys: true });
  // Messages read "<what> at line L, column C:" followed by a source excerpt; keep the first line.
  if (doc.errors.length > 0)
    return { ok: false, problems: doc.errors.map((e) => problem(`${name} is not valid YAML: ${e.message.split('\n')[0].replace(/:$/, '')}`)) };
  try {
    return { ok: true, document: doc.toJS({ maxAliasCount: 100 }) };
  } catch (error) {
    return failed(`${name} is not valid YAML: ${errorText(error)}`);
  }
}

/** Strict JSON (JSON.parse decides); the message ends with where the text stops being JSON. */
function parseJson(name: string, text: string): ParsedConfigFile {
  try {
    return { ok: true, document: JSON.parse(text) as unknown };
  } catch (error) {
    const message = errorText(error).replace(/\s+/g, ' ');
    const at = /line \d+/.test(message) ? undefined : jsonErrorPosition(message, text);
    return failed(`${name} is not valid JSON: ${message}${at === undefined ? '' : ` (line ${at.line}, column ${at.col})`}`);
  }
}

/**
 * Where JSON.parse failed, as a line and column. V8 gives an offset for some errors ("... in JSON at
 * position 8"); for the end of the input the place is the end of the text. For "Unexpected token
 * 'x'" it names the character but not where it is: JSON is YAML's flow syntax, so the `yaml`
 * parser (JSON schema) is asked, and its first error is used when it points at that character.
 * YAML reads some text that is not JSON (a `#` comment, a single-quoted string, a trailing comma
 * before `]`) and then errs elsewhere or not at all: no position is given then, rather than a wrong
 * one, and V8's message still quotes the text around the fault.
 */
function jsonErrorPosition(message: string, text: string): Position | undefined {
  const lineCounter = new LineCounter();
  const yamlErrors = parseDocument(text, { schema: 'json', lineCounter }).errors;
  const offset = /at position (\d+)/.exec(message)?.[1] ?? (/end of JSON input/.test(message) ? text.length : undefined);
  if (offset !== undefined) return lineCounter.linePos(Number(offset));
  const token = /^Unexpected token '(.)'/u.exec(message)?.[1];
  const first = yamlErrors[0]?.pos[0];
  return token !== undefined && first !== undefined && text.startsWith(token, first) ? lineCounter.linePos(first) : undefined;
}

function problem(message: string): ConfigProblem {
  return { path: 'config', message };
}

function failed(message: string): ParsedConfigFile {
  return { ok: false, problems: [problem(message)] };
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
