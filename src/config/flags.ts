/**
 * The command-line flags: one table entry per flag (name, environment twin, kind, default, help),
 * argv parsing, value parsing per kind, and the `--help` text generated from the table.
 * Every flag `--some-flag` has the environment twin `ROUTER_SOME_FLAG`; flags win over the
 * environment, the environment over the config file, the file over the defaults.
 */
import { childPath, type ConfigProblem } from './config-error.js';
import { checkHealthPath, checkHostAddress, checkSessionHeader, checkWorkers, MAX_DURATION_MS } from './config.rules.js';

/** How a flag's text is parsed. `seconds` values are returned in milliseconds. */
export type FlagKind = 'seconds' | 'count' | 'port' | 'bytes' | 'string' | 'boolean' | 'enum';

/** One flag of the table. */
export interface FlagSpec<K extends string = string> {
  /** Flag name without dashes, e.g. `drain-timeout`. */
  readonly key: K;
  /** `--drain-timeout` */
  readonly name: string;
  /** `ROUTER_DRAIN_TIMEOUT` */
  readonly env: string;
  readonly kind: FlagKind;
  /** Default in flag syntax (`300`, `64MiB`); undefined when there is none or it is computed (see help). */
  readonly default?: string;
  readonly help: string;
  /** Smallest allowed value of a `count`. */
  readonly min?: number;
  /** Allowed values of an `enum`. */
  readonly choices?: readonly string[];
  /** Other names accepted on the command line (`--replicas` for `--config`). */
  readonly aliases?: readonly string[];
  /** The config-file setting this flag overrides, e.g. `routing.session_ttl`. */
  readonly file?: string;
  /** Extra check of a `string` value; returns a problem message or undefined. */
  readonly check?: (value: string) => string | undefined;
}

type FlagExtra = Partial<Pick<FlagSpec, 'min' | 'choices' | 'aliases' | 'file' | 'check'>>;

function flag<K extends string>(key: K, kind: FlagKind, defaultValue: string | undefined, help: string, extra: FlagExtra = {}): FlagSpec<K> {
  const env = `ROUTER_${key.toUpperCase().replace(/-/g, '_')}`;
  return { key, name: `--${key}`, env, kind, default: defaultValue, help, ...extra };
}

/** Log levels accepted by `--log-level` (pino's). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;

/** The flag table (contract §1), in the order `--help` lists it. */
export const FLAGS = [
  flag('config', 'string', undefined, 'config file: JSON, or YAML when it ends in .yaml/.yml (required)', { aliases: ['--replicas'] }),
  flag('host', 'string', '0.0.0.0', 'address to listen on', { check: checkHostAddress }),
  flag('port', 'port', '8000', 'port to listen on (0 = any free port)'),
  flag('workers', 'string', '1', 'processes relaying /v1/ traffic on the one port (auto: one per core the process may use); the primary owns the fleet', {
    file: 'workers',
    check: checkWorkers,
  }),
  flag('health-interval', 'seconds', '5', 'seconds between health probes of a replica', { file: 'health.interval' }),
  flag('health-timeout', 'seconds', '2', 'seconds a health probe may take', { file: 'health.timeout' }),
  flag('health-path', 'string', '/health', 'path probed on every replica', { file: 'health.path', check: checkHealthPath }),
  flag('engine-metrics-interval', 'seconds', '5', "seconds between scrapes of a replica's engine metrics (replicas and hosts with engine or metrics_path)", {
    file: 'health.metrics_interval',
  }),
  flag('health-fall', 'count', '2', 'consecutive failed probes that make a ready replica unready', { min: 1, file: 'health.fall' }),
  flag('health-rise', 'count', '1', 'consecutive good probes that make an unready replica ready', { min: 1, file: 'health.rise' }),
  flag('request-timeout', 'seconds', '3600', 'total seconds a non-streamed request may take'),
  flag('stream-idle-timeout', 'seconds', '600', 'most seconds between two chunks of a stream'),
  flag('connect-timeout', 'seconds', '5', 'seconds to establish a connection to a replica'),
  flag('models-timeout', 'seconds', '5', 'seconds each replica gets to answer GET /v1/models'),
  flag('models-max-bytes', 'bytes', '4MiB', 'largest model list read from one replica; a longer one is abandoned and counts as unreadable'),
  flag(
    'models-grace',
    'seconds',
    '30',
    'seconds a replica whose model list was never readable stays a candidate for every model; after it, only for requests naming none',
  ),
  flag('models-refresh', 'seconds', '30', "seconds between re-reads of each ready replica's model list (GET /v1/models)"),
  flag('session-ttl', 'seconds', '600', 'seconds an idle session keeps its replica', { file: 'routing.session_ttl' }),
  flag('max-sessions', 'count', '100000', 'sessions remembered (least recently used dropped first)', { min: 1, file: 'routing.max_sessions' }),
  flag('affinity-slack', 'count', '8', 'extra in-flight requests a pinned replica may have over the least loaded', { min: 0, file: 'routing.affinity_slack' }),
  flag('prefix-affinity', 'boolean', 'true', 'route requests with no session id by prompt prefix (off: ROUTER_PREFIX_AFFINITY=false)', {
    file: 'routing.prefix_affinity',
  }),
  flag('speed-aware', 'boolean', 'true', 'compare replicas by expected wait from their measured speed (off: ROUTER_SPEED_AWARE=false)', {
    file: 'routing.speed_aware',
  }),
  flag('warm-handoff', 'boolean', 'false', "serve a new conversation's first turn on the fastest replica and prefill a copy where it will live", {
    file: 'routing.warm_handoff',
  }),
  flag('prefix-blocks', 'count', '1000000', 'prompt-prefix blocks remembered (under 100 bytes each; least recently used dropped first)', {
    min: 1,
    file: 'routing.prefix_blocks',
  }),
  flag('session-header', 'string', 'x-session-id', 'request header carrying the session id', { file: 'routing.session_header', check: checkSessionHeader }),
  flag('routing-policy', 'enum', 'affinity', 'affinity (default); round-robin and least-outstanding exist for comparison benchmarks', {
    choices: ['affinity', 'round-robin', 'least-outstanding'],
  }),
  flag('body-field', 'string', 'session_id', 'top-level JSON body field carrying the session id', { file: 'routing.body_field' }),
  flag('initial-replicas', 'count', undefined, 'launched replicas to have at start (default 1 if hosts are declared, else 0)', { min: 0 }),
  flag('max-replicas', 'count', undefined, 'cap on launched replicas (default: every declared device slot)', { min: 1 }),
  flag('launch-timeout', 'seconds', '600', 'seconds a launched replica has to become healthy'),
  flag('drain-timeout', 'seconds', '300', 'seconds a draining replica has to finish its requests'),
  flag(
    'stop-grace',
    'seconds',
    '30',
    'seconds a stopped replica has to stop answering before the router escalates (stop_command, then signals) or reports it still running',
  ),
  flag('queue-timeout', 'seconds', '30', 'seconds a request may wait for a replica under its max_inflight before 503 overloaded'),
  flag('queue-max', 'count', '1000', 'requests that may wait for a replica under its max_inflight; more get 503 overloaded at once', { min: 0 }),
  flag('redis-url', 'string', undefined, 'Redis shared by several routers: sessions and fleet leadership (default none: in-memory)'),
  flag('redis-prefix', 'string', 'affinity-router:', 'prefix of every Redis key this router uses'),
  flag('advertise-url', 'string', undefined, 'URL other routers and operators reach this router at (default http://<host>:<port>)'),
  flag('lease-ttl', 'seconds', '10', 'fleet leadership lease in Redis: a dead leader is replaced within this'),
  flag('state-file', 'string', undefined, 'file recording launched replicas, for adoption after a restart (default none)'),
  flag('discard-state', 'boolean', undefined, 'start even if the state file is corrupt or from a newer version'),
  flag('header-timeout', 'seconds', '10', 'seconds a client has to send the request headers (slow-client protection)'),
  flag('body-timeout', 'seconds', '300', 'seconds a client has to send the whole request, body included'),
  flag('max-body', 'bytes', '64MiB', 'largest request body, in bytes or with a KiB/MiB/GiB suffix'),
  flag('body-memory', 'bytes', undefined, 'request-body bytes held at once; past it 503 overloaded (default a quarter of the heap limit)'),
  flag('log-level', 'enum', 'info', 'log level', { choices: LOG_LEVELS }),
  flag('log-format', 'enum', undefined, 'log format (default json, or pretty when stdout is a terminal)', { choices: ['json', 'pretty'] }),
  flag('admin-token', 'string', undefined, 'admin API bearer token (visible in ps: prefer the environment twin)'),
  flag('admin-token-file', 'string', undefined, 'file holding the admin API bearer token'),
  flag('admin-open', 'boolean', undefined, 'serve the admin API without a token (pypto-serving-router behaviour)'),
] as const;

/** Name of a flag without dashes. */
export type FlagKey = (typeof FLAGS)[number]['key'];

/** A raw setting and where it came from (`--port`, `ROUTER_PORT`), for error paths. */
export interface RawSetting {
  readonly raw: string;
  readonly source: string;
}

/** Result of `parseArgv`. Values are raw text; booleans given on the command line are `"true"`. */
export interface ParsedArgv {
  readonly values: Partial<Record<FlagKey, RawSetting>>;
  /** `--help` or `-h` was given. */
  readonly help: boolean;
  readonly problems: readonly ConfigProblem[];
}

const BY_NAME: ReadonlyMap<string, FlagSpec<FlagKey>> = new Map(
  FLAGS.flatMap((f): [string, FlagSpec<FlagKey>][] => [f.name, ...(f.aliases ?? [])].map((n) => [n, f])),
);

/** The table entry of a flag. */
export function flagSpec(key: FlagKey): FlagSpec<FlagKey> {
  const spec = FLAGS.find((f) => f.key === key);
  if (spec === undefined) throw new Error(`no flag named --${key}`);
  return spec;
}

/**
 * Parses argv (without node and the script): `--flag value` and `--flag=value`; booleans take no
 * value; a repeated flag keeps its last value (as argparse). Unknown flags, missing values and
 * stray words are problems naming the flag or word. A value may start with one dash
 * (`--connect-timeout -1` is parsed and then refused as ≤ 0), not with two.
 */
export function parseArgv(argv: readonly string[]): ParsedArgv {
  const values: Partial<Record<FlagKey, RawSetting>> = {};
  const problems: ConfigProblem[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i += 1) {
    const word = argv[i];
    if (word === '--help' || word === '-h') {
      help = true;
      continue;
    }
    if (!word.startsWith('--') || word === '--') {
      problems.push({ path: childPath('argv', i), message: `unexpected argument ${JSON.stringify(word)} (flags start with --; see --help)` });
      continue;
    }
    const eq = word.indexOf('=');
    const name = eq >= 0 ? word.slice(0, eq) : word;
    const spec = BY_NAME.get(name);
    if (spec === undefined) {
      problems.push({ path: name, message: 'unknown flag (see --help for the list)' });
      continue;
    }
    if (spec.kind === 'boolean') {
      if (eq >= 0) problems.push({ path: name, message: `takes no value, got ${JSON.stringify(word.slice(eq + 1))}` });
      else values[spec.key] = { raw: 'true', source: name };
      continue;
    }
    if (eq >= 0) {
      values[spec.key] = { raw: word.slice(eq + 1), source: name };
    } else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) {
      values[spec.key] = { raw: argv[i + 1], source: name };
      i += 1;
    } else {
      problems.push({ path: name, message: `needs a value (${name} ${metavar(spec)})` });
    }
  }
  return { values, help, problems };
}

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
const BYTE_UNITS: Readonly<Record<string, number>> = { '': 1, b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 };
const BOOLEAN_WORDS: Readonly<Record<string, boolean>> = { 1: true, 0: false, true: true, false: false, yes: true, no: false };

/** A parsed value, or the message saying why the text is not one. */
export type FlagParse = { readonly ok: true; readonly value: number | string | boolean } | { readonly ok: false; readonly message: string };

/**
 * Parses the text of a flag or env value by the flag's kind: seconds → milliseconds (float > 0,
 * at most Node's timer limit), count → integer ≥ `min`, port → 0..65535, bytes → integer ≥ 1 with
 * an optional KiB/MiB/GiB suffix, boolean → 1/0/true/false/yes/no, enum → one of `choices`,
 * string → non-empty (plus the flag's own check).
 */
export function parseFlagValue(spec: FlagSpec, raw: string): FlagParse {
  const got = `got ${JSON.stringify(raw)}`;
  const fail = (message: string): FlagParse => ({ ok: false, message });
  const text = raw.trim();
  switch (spec.kind) {
    case 'seconds': {
      const n = NUMBER.test(text) ? Number(text) : NaN;
      if (!(n > 0)) return fail(`must be a number of seconds > 0, ${got}`);
      if (n * 1000 > MAX_DURATION_MS) return fail(`must be at most ${Math.floor(MAX_DURATION_MS / 1000)} seconds (Node's timer limit), ${got}`);
      return { ok: true, value: n * 1000 };
    }
    case 'count': {
      const min = spec.min ?? 0;
      const n = /^\+?\d+$/.test(text) ? Number(text) : NaN;
      if (!Number.isSafeInteger(n) || n < min) return fail(`must be an integer >= ${min}, ${got}`);
      return { ok: true, value: n };
    }
    case 'port': {
      const n = /^\d+$/.test(text) ? Number(text) : NaN;
      if (!(n >= 0 && n <= 65535)) return fail(`must be a port number 0..65535 (0 = any free port), ${got}`);
      return { ok: true, value: n };
    }
    case 'bytes': {
      const m = /^(\d+)\s*([A-Za-z]*)$/.exec(text);
      const unit = m === null ? undefined : BYTE_UNITS[m[2].toLowerCase()];
      const n = m === null || unit === undefined ? NaN : Number(m[1]) * unit;
      if (!Number.isSafeInteger(n) || n < 1) return fail(`must be a size >= 1 in bytes, optionally with a KiB, MiB or GiB suffix (e.g. 64MiB), ${got}`);
      return { ok: true, value: n };
    }
    case 'boolean': {
      const b = BOOLEAN_WORDS[text.toLowerCase()];
      if (b === undefined) return fail(`must be one of 1, 0, true, false, yes, no, ${got}`);
      return { ok: true, value: b };
    }
    case 'enum': {
      const choices = spec.choices ?? [];
      if (!choices.includes(text)) return fail(`must be one of ${choices.join(', ')}, ${got}`);
      return { ok: true, value: text };
    }
    case 'string': {
      if (raw === '') return fail('must not be empty');
      const problem = spec.check?.(raw);
      return problem === undefined ? { ok: true, value: raw } : fail(problem);
    }
  }
}

function metavar(spec: FlagSpec): string {
  const names: Record<FlagKind, string> = {
    seconds: 'SECONDS',
    count: 'N',
    port: 'PORT',
    bytes: 'SIZE',
    string: spec.key.endsWith('file') || spec.key === 'config' ? 'FILE' : spec.key === 'host' ? 'ADDRESS' : spec.key === 'admin-token' ? 'TOKEN' : 'TEXT',
    boolean: '',
    enum: (spec.choices ?? []).join('|'),
  };
  return names[spec.kind];
}

/** The `--help` text, generated from the table. */
export function formatUsage(): string {
  const lines = [
    'Usage: node dist/main.js --config FILE [flags]',
    '',
    'affinity-router: session-affinity router and fleet manager for OpenAI-compatible replicas.',
    'Settings come from, highest first: flags, environment (ROUTER_*), the config file, defaults.',
    'Every flag has an environment twin: --drain-timeout <-> ROUTER_DRAIN_TIMEOUT; booleans there',
    'take 1/0/true/false/yes/no.',
    '',
    'Flags:',
  ];
  for (const spec of FLAGS) {
    const flagNames = [spec.name, ...(spec.aliases ?? [])].join(', ');
    const head = `${flagNames} ${metavar(spec)}`.trimEnd();
    const details = [spec.default === undefined ? '' : `default ${spec.default}`, `env ${spec.env}`, spec.file === undefined ? '' : `file ${spec.file}`];
    lines.push(`  ${head}`, `      ${spec.help} [${details.filter((d) => d !== '').join('; ')}]`);
  }
  lines.push(
    '  -h, --help',
    '      print this help and exit',
    '',
    'The admin token is best given as ROUTER_ADMIN_TOKEN or ROUTER_ADMIN_TOKEN_FILE.',
    'Exit codes: 0 clean shutdown, 2 invalid flags or config (one "error: <path>: <message>" line each), 1 other failures.',
  );
  return `${lines.join('\n')}\n`;
}
