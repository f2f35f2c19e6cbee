/**
 * Builds the one `RouterConfig` from argv, the `ROUTER_*` environment and the config file.
 * Precedence, highest first: CLI flags, environment, config file, defaults. This is the only
 * place environment values are read (main passes `process.env` in). Every problem found is
 * collected and thrown together in one `ConfigError`; nothing is logged or printed here.
 *
 * Decisions where the spec is silent:
 * - an empty environment variable counts as unset (`ROUTER_PORT=` is ignored);
 * - a replica named `""` or `null` gets the default name `host:port` (pypto-serving-router did the
 *   same for any falsy name); a host's default name is `host<i>` (i = its index in `hosts`);
 * - replica and slot names share one namespace (launched replicas are named after their slot);
 *   host names have their own;
 * - a leading `~/` in `identity_file`, `known_hosts` and `ca_file` is expanded to the home
 *   directory (ssh did that for pypto-serving-router); other paths are used as written;
 * - admin token: at each level (flags, then environment) either the token or the token file may
 *   be given, not both; `--admin-open` together with a token is an error.
 */
import { readFileSync } from 'node:fs';
import { homedir, hostname } from 'node:os';
import { parseDocument } from 'yaml';
import { childPath, ConfigError, showValue, type ConfigProblem } from './config-error.js';
import { toHostSpec, toStaticReplicaSpec, validateConfigFile, type ConfigFileDto, type HostDto, type StaticReplicaDto } from './config.dto.js';
import { FLAGS, flagSpec, parseArgv, parseFlagValue, type FlagKey, type RawSetting } from './flags.js';
import { RouterConfig, type HostSpec, type LogFormat, type RoutingPolicy, type SlotSpec, type StaticReplicaSpec } from './router-config.js';
import { computeSlots, findSlotProblems, slotCapacity } from './slots.js';
import { findHostTemplateProblems } from './templates.js';

/** Options of `loadRouterConfig`. */
export interface LoadOptions {
  /** Reads the config file and the admin token file (default: `fs.readFileSync(p, 'utf8')`). */
  readonly readFile?: (path: string) => string;
  /** Whether stdout is a terminal: picks the default `--log-format` (pretty) (default false). */
  readonly isTty?: boolean;
}

type Env = Readonly<Record<string, string | undefined>>;
type Value = number | string | boolean;
interface Setting {
  readonly value: Value;
  readonly source: string;
}

/**
 * Loads and validates the configuration. Throws `ConfigError` with every problem found, each
 * naming its path (`hosts[1].devices_per_replica`, `--request-timeout`, `ROUTER_PORT`, `config`).
 */
export function loadRouterConfig(argv: readonly string[], env: Env, opts: LoadOptions = {}): RouterConfig {
  const readFile = opts.readFile ?? ((p: string): string => readFileSync(p, 'utf8'));
  const problems: ConfigProblem[] = [];
  const warnings: string[] = [];
  const cli = parseArgv(argv);
  problems.push(...cli.problems);
  const raw = (key: FlagKey): RawSetting | undefined => {
    const fromEnv = env[flagSpec(key).env];
    return cli.values[key] ?? (fromEnv === undefined || fromEnv === '' ? undefined : { raw: fromEnv, source: flagSpec(key).env });
  };
  for (const name of Object.keys(env)) {
    if (name.startsWith('ROUTER_') && env[name] !== '' && !FLAGS.some((f) => f.env === name)) {
      warnings.push(`${name} is set but is not a setting of affinity-router (ignored)`);
    }
  }

  const configSetting = raw('config');
  const { dto: file, problems: fileProblems } =
    configSetting === undefined
      ? { dto: undefined, problems: [{ path: '--config', message: 'required: the config file to load (--replicas FILE and ROUTER_CONFIG also work)' }] }
      : readConfigFile(configSetting.raw, readFile);
  problems.push(...fileProblems);
  const fleet = buildFleet(file, fileProblems, env, warnings);
  problems.push(...fleet.problems);

  const setting = settingResolver(raw, file, fileProblems, problems);
  // Resolve in table order, so problems are reported in the order --help lists the flags.
  for (const spec of FLAGS) if (spec.key !== 'config' && !spec.key.startsWith('admin-token')) setting(spec.key);
  const num = (key: FlagKey): number => Number(setting(key)?.value);
  const str = (key: FlagKey): string => String(setting(key)?.value);
  const optStr = (key: FlagKey): string | undefined => setting(key)?.value as string | undefined;

  const listenPort = num('port');
  for (const slot of fleet.slots) {
    if (slot.local && slot.port === listenPort) {
      problems.push({ path: `${fleet.hostPaths.get(slot.host)}.port_base`, message: `puts slot ${slot.name} on port ${slot.port}, the router's own port` });
    }
  }
  const pool = poolSize(fleet, setting('initial-replicas'), setting('max-replicas'), problems);
  const adminToken = resolveAdminToken(raw, readFile, problems, warnings);
  const adminOpen = setting('admin-open');
  if (adminOpen?.value === true) {
    if (adminToken !== undefined) problems.push({ path: adminOpen.source, message: 'contradicts the configured admin token: give one or the other' });
    else warnings.push(`${adminOpen.source}: the admin API (/replicas, /fleet, /sessions) is open to anyone who can reach the router`);
  } else if (adminToken === undefined && fleet.hosts.length > 0) {
    warnings.push('no admin token configured: the admin API answers 403 (set ROUTER_ADMIN_TOKEN or ROUTER_ADMIN_TOKEN_FILE)');
  }
  if (problems.length > 0) throw new ConfigError(problems);

  return new RouterConfig({
    configPath: configSetting?.raw,
    listenHost: str('host').replace(/^\[(.*)\]$/, '$1'),
    listenPort,
    replicas: fleet.replicas,
    hosts: fleet.hosts,
    slots: fleet.slots,
    routing: {
      sessionHeader: str('session-header').toLowerCase(),
      bodyField: str('body-field'),
      affinitySlack: num('affinity-slack'),
      policy: str('routing-policy') as RoutingPolicy,
      sessionTtlMs: num('session-ttl'),
      maxSessions: num('max-sessions'),
    },
    health: {
      path: str('health-path'),
      intervalMs: num('health-interval'),
      timeoutMs: num('health-timeout'),
      fall: num('health-fall'),
      rise: num('health-rise'),
    },
    requestTimeoutMs: num('request-timeout'),
    streamIdleTimeoutMs: num('stream-idle-timeout'),
    connectTimeoutMs: num('connect-timeout'),
    modelsTimeoutMs: num('models-timeout'),
    initialReplicas: pool.initial,
    maxReplicas: pool.ceiling,
    launchTimeoutMs: num('launch-timeout'),
    drainTimeoutMs: num('drain-timeout'),
    stopGraceMs: num('stop-grace'),
    queueTimeoutMs: num('queue-timeout'),
    queueMax: num('queue-max'),
    stateFile: optStr('state-file'),
    redisUrl: optStr('redis-url'),
    redisPrefix: str('redis-prefix'),
    advertiseUrl: optStr('advertise-url') ?? `http://${advertiseHost(str('host'))}:${listenPort}`,
    leaseTtlMs: num('lease-ttl'),
    discardState: setting('discard-state')?.value === true,
    maxBodyBytes: num('max-body'),
    headerTimeoutMs: num('header-timeout'),
    bodyTimeoutMs: num('body-timeout'),
    logLevel: str('log-level'),
    logFormat: (optStr('log-format') ?? (opts.isTty === true ? 'pretty' : 'json')) as LogFormat,
    adminToken,
    adminOpen: adminOpen?.value === true,
    warnings,
  });
}

/**
 * Resolves one setting (memoised): flag or env text parsed by the flag's kind (a bad value is a
 * problem naming its flag/variable, and the next source is used), else the file's value (already
 * checked by the DTOs; seconds → ms), else the table's default.
 */
function settingResolver(
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

/**
 * The launched pool: ceiling = min(slot capacity, --max-replicas); --initial-replicas defaults to
 * 1 when hosts are declared (else 0) and may not exceed the ceiling.
 */
function poolSize(fleet: Fleet, initial: Setting | undefined, max: Setting | undefined, problems: ConfigProblem[]): { initial: number; ceiling: number } {
  const capacity = fleet.hosts.reduce((sum, h) => sum + slotCapacity(h), 0);
  const cap = max === undefined ? undefined : Number(max.value);
  const ceiling = cap === undefined ? capacity : Math.min(capacity, cap);
  const count = initial === undefined ? (fleet.hosts.length > 0 ? 1 : 0) : Number(initial.value);
  if (fleet.complete && count > ceiling) {
    const why = max !== undefined && cap !== undefined && cap < capacity ? `declared device slots: ${capacity}, capped by ${max.source} ${cap}` : 'declared device slots';
    problems.push({ path: initial?.source ?? '--initial-replicas', message: `${count} exceeds the pool ceiling ${ceiling} (${why})` });
  }
  return { initial: count, ceiling };
}

/** Reads and parses the file (YAML by extension, else JSON), then validates it against the DTOs. */
function readConfigFile(path: string, readFile: (p: string) => string): { dto: ConfigFileDto | undefined; problems: ConfigProblem[] } {
  let text: string;
  try {
    text = readFile(path).replace(/^\uFEFF/, '');
  } catch (error) {
    return { dto: undefined, problems: [{ path: 'config', message: `cannot read ${JSON.stringify(path)}: ${errorText(error)}` }] };
  }
  let plain: unknown;
  if (/\.ya?ml$/i.test(path)) {
    const yamlProblem = (message: string): ConfigProblem => ({ path: 'config', message: `${JSON.stringify(path)} is not valid YAML: ${message}` });
    const doc = parseDocument(text, { uniqueKeys: true });
    // Messages read "<what> at line L, column C:" followed by a source excerpt; keep the first line.
    if (doc.errors.length > 0) return { dto: undefined, problems: doc.errors.map((e) => yamlProblem(e.message.split('\n')[0].replace(/:$/, ''))) };
    try {
      plain = doc.toJS({ maxAliasCount: 100 });
    } catch (error) {
      return { dto: undefined, problems: [yamlProblem(errorText(error))] };
    }
  } else {
    try {
      plain = JSON.parse(text);
    } catch (error) {
      return { dto: undefined, problems: [{ path: 'config', message: `${JSON.stringify(path)} is not valid JSON: ${jsonErrorText(error, text)}` }] };
    }
  }
  const check = validateConfigFile(plain, 'config');
  const declared = [check.dto?.replicas, check.dto?.hosts].some((list) => Array.isArray(list) && list.length > 0);
  if (check.dto !== undefined && !declared && !check.problems.some((p) => /^(replicas|hosts)\b/.test(p.path))) {
    check.problems.push({ path: 'config', message: `${JSON.stringify(path)} declares neither a replica nor a host (add "replicas" or "hosts")` });
  }
  return check;
}

/** The file's value for `routing.session_ttl`-style paths. */
function fileSetting(file: ConfigFileDto | undefined, path: string): Value | undefined {
  const [section, field] = path.split('.');
  const values: unknown = file === undefined ? undefined : (file as unknown as Record<string, unknown>)[section];
  if (typeof values !== 'object' || values === null) return undefined;
  const value: unknown = (values as Record<string, unknown>)[field];
  return typeof value === 'number' || typeof value === 'string' || typeof value === 'boolean' ? value : undefined;
}

interface Fleet {
  readonly replicas: StaticReplicaSpec[];
  readonly hosts: HostSpec[];
  readonly slots: SlotSpec[];
  /** Host name → its JSON path (`hosts[2]`). */
  readonly hostPaths: Map<string, string>;
  readonly problems: ConfigProblem[];
  /** False when a replica or host was invalid and left out (so capacity is unknown). */
  readonly complete: boolean;
}

/** Turns the validated file into specs and checks the rules that span fields and entries. */
function buildFleet(file: ConfigFileDto | undefined, fileProblems: readonly ConfigProblem[], env: Env, warnings: string[]): Fleet {
  const problems: ConfigProblem[] = [];
  const above = (a: string, b: string): boolean => a === b || b.startsWith(`${a}.`) || b.startsWith(`${a}[`);
  /** A problem at or above `path` (a problem at `hosts` invalidates `hosts[0]`). */
  const bad = (path: string): boolean => fileProblems.some((p) => above(p.path, path));
  /** A problem at, above or anywhere under `path`. */
  const touched = (path: string): boolean => fileProblems.some((p) => above(p.path, path) || above(path, p.path));
  /** The entry without its invalid fields, so the checks that need only valid fields still run. */
  const valid = <T extends object>(dto: T, path: string): Partial<T> =>
    Object.fromEntries(Object.entries(dto).filter(([k]) => !bad(childPath(path, k)))) as Partial<T>;
  const list = <T>(items: T[] | undefined, path: string): T[] => (Array.isArray(items) && !bad(path) ? items : []);
  const home = env.HOME !== undefined && env.HOME !== '' ? env.HOME : homedir();
  const expandHome = (p: string | undefined): string | undefined => (p?.startsWith('~/') === true ? `${home}${p.slice(1)}` : p);

  const hostPaths = new Map<string, string>();
  const hosts: HostSpec[] = [];
  list(file?.hosts, 'hosts').forEach((dto, i) => {
    const path = childPath('hosts', i);
    if (bad(path)) return;
    const ok = valid(dto, path);
    const has = (field: keyof HostDto): boolean => !bad(`${path}.${field}`);
    // Invalid fields are left out or replaced by stand-ins that raise no further problem.
    const host = toHostSpec({ ...ok, devices: ok.devices ?? [], ...(has('model') ? {} : { model: '?' }) }, i, expandHome);
    const own: ConfigProblem[] = [];
    if (has('name')) {
      const clash = hostPaths.get(host.name);
      if (clash !== undefined) own.push({ path: `${path}.name`, message: `${showValue(host.name)} is already the name of ${clash}` });
      hostPaths.set(host.name, path);
    }
    if (has('devices') && has('devices_per_replica') && has('port_base')) own.push(...findSlotProblems(host, path));
    own.push(...findHostTemplateProblems(host, path));
    if (host.model === undefined && host.command === undefined && has('command')) {
      own.push({ path: `${path}.model`, message: 'required unless the host has its own "command"' });
    }
    if (host.command !== undefined && host.serveArgs.length > 0) warnings.push(`${path}.serve_args: ignored because the host has its own "command"`);
    if (host.insecureAcceptHostKey && host.ssh !== null) warnings.push(`${path}.insecure_accept_host_key: the ssh host key of ${host.ssh} is accepted without checking`);
    problems.push(...own);
    if (own.length === 0 && !touched(path)) hosts.push(host);
  });

  const slots = computeSlots(hosts);
  const slotAt = new Map<string, SlotSpec>();
  for (const slot of slots) {
    const where = `${slot.address}:${slot.port}`;
    const other = slotAt.get(where);
    if (other !== undefined) problems.push({ path: `${hostPaths.get(slot.host)}.port_base`, message: `puts slot ${slot.name} on ${where}, already used by slot ${other.name}` });
    slotAt.set(where, slot);
  }

  const replicaNames = new Map<string, string>(slots.map((s) => [s.name, `a device slot of ${hostPaths.get(s.host)} (${s.host})`]));
  const replicas: StaticReplicaSpec[] = [];
  list(file?.replicas, 'replicas').forEach((dto, i) => {
    const path = childPath('replicas', i);
    if (bad(path)) return;
    const ok = valid(dto, path);
    const has = (field: keyof StaticReplicaDto): boolean => !bad(`${path}.${field}`);
    const replica = toStaticReplicaSpec({ host: '?', port: 0, ...ok }, expandHome);
    const named = dto.name !== undefined && dto.name !== null && dto.name !== '';
    const nameKnown = has('name') && (named || (has('host') && has('port')));
    const clash = nameKnown ? replicaNames.get(replica.name) : undefined;
    if (clash !== undefined) problems.push({ path: `${path}.name`, message: `${showValue(replica.name)}${named ? '' : ' (host:port)'} is already the name of ${clash}` });
    if (nameKnown) replicaNames.set(replica.name, path);
    const address = ['localhost', '::1'].includes(replica.host) ? '127.0.0.1' : replica.host;
    const slot = has('host') && has('port') ? slotAt.get(`${address}:${replica.port}`) : undefined;
    if (slot !== undefined) problems.push({ path: `${path}.port`, message: `${replica.port} on ${replica.host} is where slot ${slot.name} listens` });
    if (replica.caFile !== undefined && replica.scheme !== 'https' && has('scheme')) {
      problems.push({ path: `${path}.ca_file`, message: `is only used with "scheme": "https", but this replica uses ${replica.scheme}` });
    }
    if (!touched(path)) replicas.push(replica);
  });
  const complete = file !== undefined && !fileProblems.some((p) => /^(hosts|replicas)\b/.test(p.path)) && problems.length === 0;
  return { replicas, hosts, slots, hostPaths, problems, complete };
}

/**
 * The admin token: from `--admin-token` / `--admin-token-file`, else `ROUTER_ADMIN_TOKEN` /
 * `ROUTER_ADMIN_TOKEN_FILE` (trailing newline trimmed). The token itself never appears in a message.
 */
function resolveAdminToken(
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
      problems.push({ path: source, message: `cannot read the admin token file ${JSON.stringify(tokenFile.raw)}: ${errorText(error)}` });
      return undefined;
    }
  } else if (token !== undefined) {
    ({ raw: value, source } = token);
    if (source.startsWith('--')) warnings.push(`${source}: the admin token is visible to every local user in ps; prefer ROUTER_ADMIN_TOKEN or ROUTER_ADMIN_TOKEN_FILE`);
  } else {
    return undefined;
  }
  if (value === '') problems.push({ path: source, message: `the admin token${fromFile ? ` in ${JSON.stringify(tokenFile?.raw)}` : ''} is empty` });
  else if (!/^[\x21-\x7e]+$/.test(value)) problems.push({ path: source, message: 'the admin token must be printable ASCII without spaces (value not shown)' });
  else return value;
  return undefined;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** JSON.parse's message, plus the line and column of the first offending character. */
function jsonErrorText(error: unknown, text: string): string {
  const message = errorText(error).replace(/\s+/g, ' ');
  if (/line \d+/.test(message)) return message;
  const at = /at position (\d+)/.exec(message);
  const offset = at === null ? jsonErrorOffset(text) : Number(at[1]);
  const before = text.slice(0, offset);
  return `${message} (line ${before.split('\n').length}, column ${offset - before.lastIndexOf('\n')})`;
}

/** Offset of the first character that makes `text` invalid JSON: the end of its longest valid prefix. */
function jsonErrorOffset(text: string): number {
  const validPrefix = (length: number): boolean => {
    try {
      JSON.parse(text.slice(0, length));
      return true;
    } catch (error) {
      const at = /at position (\d+)/.exec(errorText(error));
      return /end of JSON input/.test(errorText(error)) || (at !== null && Number(at[1]) >= length);
    }
  };
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (validPrefix(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** A listen address others can dial: a wildcard becomes this machine's name. */
function advertiseHost(listen: string): string {
  const h = listen.replace(/^\[(.*)\]$/, '$1');
  if (h === '0.0.0.0' || h === '::') return hostname();
  return h.includes(':') ? `[${h}]` : h;
}
