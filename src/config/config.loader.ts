/**
 * Builds the one `RouterConfig` from argv, the `ROUTER_*` environment and the config file, in four
 * steps: parse the file (config.parse.ts), validate it against the DTOs and the rules that span
 * entries (config.validate.ts, config.fleet.ts), merge it under the flags and environment
 * (config.sources.ts), and report: every problem found is collected and thrown together in one
 * `ConfigError` (config-error.ts; cli.ts prints it and exits 2). Nothing is logged or printed here.
 *
 * Decisions where the spec is silent:
 * - a replica named `null` gets the default name `host:port` (pypto-serving-router did the same
 *   for any falsy name; a present `""` is an error); a host's default name is `host<i>`;
 * - replica and slot names share one namespace (launched replicas are named after their slot);
 *   host names have their own;
 * - a leading `~/` in `identity_file`, `known_hosts` and `ca_file` is expanded to the home
 *   directory (ssh did that for pypto-serving-router); other paths are used as written;
 * - `--admin-open` together with an admin token is an error.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, hostname } from 'node:os';
import { ConfigError, type ConfigProblem } from './config-error.js';
import { buildAutoscale } from './config.autoscale.js';
import { buildFleet, type Fleet } from './config.fleet.js';
import { parseConfigFile } from './config.parse.js';
import { bodyMemoryBytes } from './body-memory.js';
import { readCommandLine, resolveAdminToken, settingResolver, type Env, type Setting } from './config.sources.js';
import { validateConfigFile, type ConfigFileCheck } from './config.validate.js';
import { FLAGS, type FlagKey } from './flags.js';
import { RouterConfig, type LogFormat, type RoutingPolicy } from './router-config.js';
import { slotCapacity } from './slots.js';

/** Options of `loadRouterConfig`. */
export interface LoadOptions {
  /** Reads the config file and the admin token file (default: `fs.readFileSync(p, 'utf8')`). */
  readonly readFile?: (path: string) => string;
  /** Whether stdout is a terminal: picks the default `--log-format` (pretty) (default false). */
  readonly isTty?: boolean;
  /**
   * A reload of a running router (docs/reload.md): `--initial-replicas` applies at start only, so
   * a fleet shrunk below it is not refused; the count is capped at the new ceiling instead.
   */
  readonly reload?: boolean;
}

/**
 * Loads and validates the configuration. Throws `ConfigError` with every problem found, each
 * naming its path (`hosts[1].devices_per_replica`, `--request-timeout`, `ROUTER_PORT`, `config`).
 */
export function loadRouterConfig(argv: readonly string[], env: Env, opts: LoadOptions = {}): RouterConfig {
  const readFile = opts.readFile ?? ((p: string): string => readFileSync(p, 'utf8'));
  const problems: ConfigProblem[] = [];
  const warnings: string[] = [];
  const { raw, home } = readCommandLine(argv, env, problems, warnings);

  const configSetting = raw('config');
  const { dto: file, problems: fileProblems } =
    configSetting === undefined
      ? { dto: undefined, problems: [{ path: '--config', message: 'required: the config file to load (--replicas FILE and ROUTER_CONFIG also work)' }] }
      : readConfigFile(configSetting.raw, readFile);
  problems.push(...fileProblems);
  const expandHome = (p: string | undefined): string | undefined => (p?.startsWith('~/') === true ? `${home}${p.slice(1)}` : p);
  const fleet = buildFleet(file, fileProblems, expandHome, warnings);
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
  const pool = poolSize(fleet, setting('initial-replicas'), setting('max-replicas'), opts.reload === true ? [] : problems);
  const capacity = fleet.complete ? fleet.hosts.reduce((sum, h) => sum + slotCapacity(h), 0) : undefined;
  const autoscale = buildAutoscale(file?.autoscale, fileProblems, fleet.hosts.length, capacity, problems);
  const adminToken = resolveAdminToken(raw, readFile, problems, warnings);
  const adminOpen = setting('admin-open');
  if (adminOpen?.value === true) {
    if (adminToken !== undefined) problems.push({ path: adminOpen.source, message: 'contradicts the configured admin token: give one or the other' });
    else warnings.push(`${adminOpen.source}: the admin API (/replicas, /fleet, /sessions) is open to anyone who can reach the router`);
  } else if (adminToken === undefined && fleet.hosts.length > 0) {
    warnings.push('no admin token configured: the admin API answers 403 (set ROUTER_ADMIN_TOKEN or ROUTER_ADMIN_TOKEN_FILE)');
  }
  const bodyMemory = bodyMemoryBytes(setting('body-memory'), num('max-body'), problems);
  if (problems.length > 0) throw new ConfigError(problems);

  return new RouterConfig({
    configPath: configSetting?.raw,
    listenHost: str('host').replace(/^\[(.*)\]$/, '$1'),
    listenPort,
    workers: str('workers').trim() === 'auto' ? availableParallelism() : Number(str('workers')),
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
      prefixAffinity: setting('prefix-affinity')?.value === true,
      prefixBlocks: num('prefix-blocks'),
      speedAware: setting('speed-aware')?.value === true,
      warmHandoff: setting('warm-handoff')?.value === true,
    },
    health: {
      path: str('health-path'),
      intervalMs: num('health-interval'),
      timeoutMs: num('health-timeout'),
      fall: num('health-fall'),
      rise: num('health-rise'),
      metricsIntervalMs: num('engine-metrics-interval'),
    },
    autoscale,
    requestTimeoutMs: num('request-timeout'),
    streamIdleTimeoutMs: num('stream-idle-timeout'),
    connectTimeoutMs: num('connect-timeout'),
    modelsTimeoutMs: num('models-timeout'),
    modelsRefreshMs: num('models-refresh'),
    modelsMaxBytes: num('models-max-bytes'),
    modelsGraceMs: num('models-grace'),
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
    bodyMemoryBytes: bodyMemory,
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
 * The launched pool: ceiling = min(slot capacity, --max-replicas); --initial-replicas defaults to
 * 1 when hosts are declared (else 0) and may not exceed the ceiling.
 */
function poolSize(fleet: Fleet, initial: Setting | undefined, max: Setting | undefined, problems: ConfigProblem[]): { initial: number; ceiling: number } {
  const capacity = fleet.hosts.reduce((sum, h) => sum + slotCapacity(h), 0);
  const cap = max === undefined ? undefined : Number(max.value);
  const ceiling = cap === undefined ? capacity : Math.min(capacity, cap);
  const count = initial === undefined ? (fleet.hosts.length > 0 ? 1 : 0) : Number(initial.value);
  if (fleet.complete && count > ceiling) {
    const why =
      max !== undefined && cap !== undefined && cap < capacity ? `declared device slots: ${capacity}, capped by ${max.source} ${cap}` : 'declared device slots';
    problems.push({ path: initial?.source ?? '--initial-replicas', message: `${count} exceeds the pool ceiling ${ceiling} (${why})` });
  }
  return { initial: Math.min(count, ceiling), ceiling };
}

/** Parses the file, then validates the document. */
function readConfigFile(path: string, readFile: (p: string) => string): ConfigFileCheck {
  const parsed = parseConfigFile(path, readFile);
  return parsed.ok ? validateConfigFile(parsed.document, path) : { dto: undefined, problems: parsed.problems };
}

/** A listen address others can dial: a wildcard becomes this machine's name. */
function advertiseHost(listen: string): string {
  const h = listen.replace(/^\[(.*)\]$/, '$1');
  if (h === '0.0.0.0' || h === '::') return hostname();
  return h.includes(':') ? `[${h}]` : h;
}
