/**
 * Where a setting comes from, highest first: CLI flags, their `ROUTER_*` environment twins, the
 * config file, the flag table's defaults. This is the only code that reads environment values
 * (main.ts hands `process.env` in once); everything after it sees settings, not variables.
 *
 * Decisions where the spec is silent:
 * - an empty environment variable counts as unset (`ROUTER_PORT=` is ignored);
 * - a set `ROUTER_*` variable that is not a setting is a warning, not an error;
 * - admin token: at each level (flags, then environment) either the token or the token file may
 *   be given, not both.
 */
import { homedir } from 'node:os';
import type { ConfigProblem } from './config-error.js';
import type { ConfigFileDto } from './config.dto.js';
import { FLAGS, flagSpec, parseArgv, parseFlagValue, type FlagKey, type RawSetting } from './flags.js';

/** The process environment (`process.env`), or a test's stand-in. */
export type Env = Readonly<Record<string, string | undefined>>;

/** A resolved setting and where it came from (`--port`, `ROUTER_PORT`, `health.interval`, `default`). */
export interface Setting {
  readonly value: number | string | boolean;
  readonly source: string;
}

/** The two layers above the file, read once. */
export interface CommandLine {
  /** A flag's text from argv, else from its environment twin. */
  readonly raw: (key: FlagKey) => RawSetting | undefined;
  /** The directory a leading `~/` in a config path stands for: `HOME`, else the OS's answer. */
  readonly home: string;
}

/** Reads argv and the environment: argv problems and unknown `ROUTER_*` variables are reported. */
export function readCommandLine(argv: readonly string[], env: Env, problems: ConfigProblem[], warnings: string[]): CommandLine {
  const cli = parseArgv(argv);
  problems.push(...cli.problems);
  for (const name of Object.keys(env)) {
    if (name.startsWith('ROUTER_') && env[name] !== '' && !FLAGS.some((f) => f.env === name)) {
      warnings.push(`${name} is set but is not a setting of affinity-router (ignored)`);
    }
  }
  const raw = (key: FlagKey): RawSetting | undefined => {
    const fromEnv = env[flagSpec(key).env];
    return cli.values[key] ?? (fromEnv === undefined || fromEnv === '' ? undefined : { raw: fromEnv, source: flagSpec(key).env });
  };
  return { raw, home: env.HOME !== undefined && env.HOME !== '' ? env.HOME : homedir() };
}

/**
 * Resolves one setting (memoised): flag or env text parsed by the flag's kind (a bad value is a
 * problem naming its flag/variable, and the next source is used), else the file's value (already
 * checked by the DTOs; seconds → ms), else the table's default.
 */
export function settingResolver(
  raw: (key: FlagKey) => RawSetting | undefined,
  file: ConfigFileDto | undefined,
  fileProblems: readonly ConfigProblem[],
  problems: ConfigProblem[],
): (key: FlagKey) => Setting | undefined {
  const resolve = (key: FlagKey): Setting | undefined => {
    const spec = flagSpec(key);
    const given = raw(key);
    if (given !== undefined) {
      const parsed = parseFlagValue(spec, given.raw);
      if (parsed.ok) return { value: parsed.value, source: given.source };
      problems.push({ path: given.source, message: parsed.message });
    }
    const fromFile = spec.file === undefined ? undefined : fileSetting(file, spec.file);
    if (spec.file !== undefined && fromFile !== undefined && !fileProblems.some((p) => p.path === spec.file)) {
      return { value: spec.kind === 'seconds' ? Number(fromFile) * 1000 : fromFile, source: spec.file };
    }
    if (spec.default === undefined) return undefined;
    const parsed = parseFlagValue(spec, spec.default);
    if (!parsed.ok) throw new Error(`flag table: the default of ${spec.name} is invalid: ${parsed.message}`);
    return { value: parsed.value, source: 'default' };
  };
  const resolved = new Map<FlagKey, Setting | undefined>();
  return (key) => {
    if (!resolved.has(key)) resolved.set(key, resolve(key));
    return resolved.get(key);
  };
}

/** The file's value for `routing.session_ttl`-style paths, or a top-level key (`workers`). */
function fileSetting(file: ConfigFileDto | undefined, path: string): Setting['value'] | undefined {
  const [section, field] = path.split('.');
  const top: unknown = file === undefined ? undefined : (file as unknown as Record<string, unknown>)[section];
  const values: unknown = field === undefined ? { [section]: top } : top;
  if (typeof values !== 'object' || values === null) return undefined;
  const value: unknown = (values as Record<string, unknown>)[field ?? section];
  return typeof value === 'number' || typeof value === 'string' || typeof value === 'boolean' ? value : undefined;
}

/**
 * The admin token: from `--admin-token` / `--admin-token-file`, else `ROUTER_ADMIN_TOKEN` /
 * `ROUTER_ADMIN_TOKEN_FILE` (trailing newline trimmed). The token itself never appears in a message.
 */
export function resolveAdminToken(
  raw: (key: FlagKey) => RawSetting | undefined,
  readFile: (p: string) => string,
  problems: ConfigProblem[],
  warnings: string[],
): string | undefined {
  const token = raw('admin-token');
  const tokenFile = raw('admin-token-file');
  const level = (s: RawSetting): number => (s.source.startsWith('--') ? 0 : 1);
  if (token !== undefined && tokenFile !== undefined && level(token) === level(tokenFile)) {
    problems.push({ path: token.source, message: `give either ${token.source} or ${tokenFile.source}, not both` });
    return undefined;
  }
  const fromFile = tokenFile !== undefined && (token === undefined || level(tokenFile) < level(token));
  let value: string;
  let source: string;
  if (fromFile) {
    source = tokenFile.source;
    try {
      value = readFile(tokenFile.raw).replace(/\r?\n$/, '');
    } catch (error) {
      problems.push({
        path: source,
        message: `cannot read the admin token file ${JSON.stringify(tokenFile.raw)}: ${error instanceof Error ? error.message : String(error)}`,
      });
      return undefined;
    }
  } else if (token !== undefined) {
    ({ raw: value, source } = token);
    if (source.startsWith('--'))
      warnings.push(`${source}: the admin token is visible to every local user in ps; prefer ROUTER_ADMIN_TOKEN or ROUTER_ADMIN_TOKEN_FILE`);
  } else {
    return undefined;
  }
  if (value === '') problems.push({ path: source, message: `the admin token${fromFile ? ` in ${JSON.stringify(tokenFile?.raw)}` : ''} is empty` });
  else if (!/^[\x21-\x7e]+$/.test(value)) problems.push({ path: source, message: 'the admin token must be printable ASCII without spaces (value not shown)' });
  else return value;
  return undefined;
}
