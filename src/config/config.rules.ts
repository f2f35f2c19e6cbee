/**
 * The value rules of the config file and the flag table: each takes a value and returns the
 * problem message (naming the offending value) or undefined. `Check(rule)` turns a rule into a
 * class-validator decorator for the DTOs in config.dto.ts; the `check*` functions are also the
 * flag table's string checks (flags.ts), so a flag and its file twin refuse the same values.
 * Types are checked strictly: nothing is converted (a port `"8000"` or `true` is an error).
 */
import { isIPv4, isIPv6 } from 'node:net';
import { ValidateBy, ValidateIf } from 'class-validator';
import { showValue } from './config-error.js';

/** Names of replicas and hosts. */
export const NAME_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;
/** Longest duration a setting may have (ms): Node's timer limit; a longer timer would fire at once. */
export const MAX_DURATION_MS = 2 ** 31 - 1;

/** A value rule: the problem message, or undefined when the value is fine. */
export type Rule = (value: unknown) => string | undefined;

/** `got <value>`: the tail of every rule's message. */
export const got = (value: unknown): string => `got ${showValue(value)}`;
/** A JSON object (not an array, not null). */
export const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

// ---- value rules, shared with the flag table ---------------------------------------------------

const LABEL = '[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?';
const HOSTNAME = new RegExp(`^(?=.{1,253}\\.?$)${LABEL}(\\.${LABEL})*\\.?$`);

/** A hostname, IPv4 or IPv6 address (brackets allowed around IPv6). Returns a problem or undefined. */
export function checkHostAddress(value: string): string | undefined {
  const bare = value.startsWith('[') && value.endsWith(']') ? value.slice(1, -1) : value;
  if (isIPv6(bare) || (bare === value && isIPv4(value))) return undefined;
  if (bare === value && HOSTNAME.test(value) && !/^[\d.]+$/.test(value)) return undefined;
  return `must be a hostname, IPv4 or IPv6 address, ${got(value)}`;
}

/** Most worker processes accepted: far above any machine's cores, low enough to catch a typo. */
export const MAX_WORKERS = 256;

/** `--workers`: an integer 1..MAX_WORKERS or `auto`. */
export function checkWorkers(value: string): string | undefined {
  const v = value.trim();
  if (v === 'auto') return undefined;
  const n = /^\d+$/.test(v) ? Number(v) : NaN;
  if (n >= 1 && n <= MAX_WORKERS) return undefined;
  return `must be a number of worker processes 1..${MAX_WORKERS} or auto, ${got(value)}`;
}

/** An ssh destination `user@host`, `host`, `user@[v6]` or a bare IPv6 address. */
export function checkSshDestination(value: string): string | undefined {
  const at = value.lastIndexOf('@');
  const user = at >= 0 ? value.slice(0, at) : undefined;
  const host = value.slice(at + 1);
  const hostOk = checkHostAddress(host) === undefined;
  if (user !== undefined && (user === '' || /[\s\0]/.test(user) || user.startsWith('-'))) {
    return `must be user@host, host or null (local), and the user part is not valid: ${got(value)}`;
  }
  if (!hostOk) return `must be user@host, host or null (local), with host a hostname or IP address (set the port with ssh_port), ${got(value)}`;
  return undefined;
}

/** A header name as Node reports it: a lower-cased RFC 9110 token. */
export function checkSessionHeader(value: string): string | undefined {
  return /^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(value.toLowerCase()) ? undefined : `must be an HTTP header name, ${got(value)}`;
}

/** An absolute request path. */
export function checkHealthPath(value: string): string | undefined {
  return /^\/[\x21-\x7e]*$/.test(value) ? undefined : `must be a path starting with "/" (no spaces), ${got(value)}`;
}

// ---- field rules (the DTOs' decorators) -------------------------------------------------------

export const integer =
  (min: number, max = Number.MAX_SAFE_INTEGER): Rule =>
  (v) =>
    typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max
      ? undefined
      : `must be an integer ${max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in ${min}..${max}`}, ${got(v)}`;
export const port = integer(1, 65535);
export const seconds: Rule = (v) =>
  typeof v !== 'number' || !(v > 0) || !Number.isFinite(v)
    ? `must be a number of seconds > 0, ${got(v)}`
    : v * 1000 > MAX_DURATION_MS
      ? `must be at most ${Math.floor(MAX_DURATION_MS / 1000)} seconds, ${got(v)}`
      : undefined;
export const positive: Rule = (v) => (typeof v === 'number' && v > 0 && Number.isFinite(v) ? undefined : `must be a number > 0, ${got(v)}`);
export const boolean: Rule = (v) => (typeof v === 'boolean' ? undefined : `must be true or false, ${got(v)}`);
export const text: Rule = (v) => (typeof v === 'string' && v !== '' ? undefined : `must be a non-empty string, ${got(v)}`);
export const checked =
  (check: (s: string) => string | undefined): Rule =>
  (v) =>
    text(v) ?? check(v as string);
export const oneOf =
  (choices: readonly string[]): Rule =>
  (v) =>
    typeof v === 'string' && choices.includes(v) ? undefined : `must be one of ${choices.map((c) => `"${c}"`).join(', ')}, ${got(v)}`;
/** Replica/host names; absent or null means "use the default name", but a present name is never empty (contract §2). */
export const optionalName: Rule = (v) =>
  v === undefined || v === null || (typeof v === 'string' && NAME_PATTERN.test(v))
    ? undefined
    : v === ''
      ? 'must not be empty (leave the name out, or set it to null, for the default name)'
      : `must be 1-64 characters of A-Z a-z 0-9 . _ : -, ${got(v)}`;
export const stringList =
  (nonEmpty: boolean): Rule =>
  (v) => {
    if (!Array.isArray(v)) return `must be an array of strings, ${got(v)}`;
    if (nonEmpty && v.length === 0) return 'must not be empty';
    const bad = v.findIndex((s) => typeof s !== 'string');
    if (bad >= 0) return `must hold only strings; element [${bad}] is ${showValue(v[bad])}`;
    if (nonEmpty && v[0] === '') return 'element [0] (the program) must not be empty';
    return undefined;
  };
/** A static replica's `models` (contract §4.3): a non-empty list of distinct, non-empty model ids. */
export const modelList: Rule = (v) => {
  if (!Array.isArray(v) || v.length === 0) return `must be a non-empty array of model ids, ${got(v)}`;
  const bad = v.findIndex((m) => typeof m !== 'string' || m === '');
  if (bad >= 0) return `model ids must be non-empty strings; element [${bad}] is ${showValue(v[bad])}`;
  const dup: unknown = v.find((m: unknown, i) => v.indexOf(m) !== i);
  return dup === undefined ? undefined : `model ${showValue(dup)} is listed more than once`;
};
export const devices: Rule = (v) => {
  if (!Array.isArray(v) || v.length === 0) return `must be a non-empty array of device ids, ${got(v)}`;
  const bad = v.findIndex((d) => typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0);
  if (bad >= 0) return `device ids must be integers >= 0; element [${bad}] is ${showValue(v[bad])}`;
  const dup: unknown = v.find((d: unknown, i) => v.indexOf(d) !== i);
  return dup === undefined ? undefined : `device id ${showValue(dup)} is declared more than once`;
};
export const envMap: Rule = (v) => {
  if (!isPlainObject(v)) return `must be an object of NAME: "value" strings, ${got(v)}`;
  for (const [key, value] of Object.entries(v)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) return `variable name ${showValue(key)} is not valid (use [A-Za-z_][A-Za-z0-9_]*)`;
    if (typeof value !== 'string') return `value of ${key} must be a string, ${got(value)}`;
  }
  return undefined;
};
/** Arrays of objects; non-object elements other than arrays are reported per element by the nested validation. */
export const objectList: Rule = (v) => {
  if (!Array.isArray(v)) return `must be an array of objects, ${got(v)}`;
  const nested = v.findIndex((e) => Array.isArray(e));
  return nested < 0 ? undefined : `element [${nested}] must be an object, ${got(v[nested])}`;
};
/** The file's `workers`: an integer 1..MAX_WORKERS or "auto". */
export const workers: Rule = (v) =>
  v === 'auto' || (Number.isInteger(v) && (v as number) >= 1 && (v as number) <= MAX_WORKERS)
    ? undefined
    : `must be a number of worker processes 1..${MAX_WORKERS} or "auto", ${got(v)}`;
export const section: Rule = (v) => (isPlainObject(v) ? undefined : `must be an object, ${got(v)}`);

/** A class-validator decorator from a rule: one message per field, naming the offending value. */
export function Check(rule: Rule): PropertyDecorator {
  return ValidateBy({
    name: 'configRule',
    validator: { validate: (value: unknown) => rule(value) === undefined, defaultMessage: (args) => rule(args?.value) ?? '' },
  });
}

/** Message of `ValidateNested` for a list element or section that is not an object. */
export const mustBeObject = (args: { value: unknown }): string => `must be an object, ${got(args.value)}`;

/** Skip the field's other rules when it is absent or null. */
export const Optional = (): PropertyDecorator => ValidateIf((_object: object, value: unknown) => value !== undefined && value !== null);
