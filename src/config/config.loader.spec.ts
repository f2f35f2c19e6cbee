/** Settings (contract §1): flags, env twins, precedence, derived values, admin token. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, type ConfigProblem } from './config-error.js';
import { loadRouterConfig, type LoadOptions } from './config.loader.js';
import type { RouterConfig } from './router-config.js';

type Env = Record<string, string | undefined>;
const STATIC = { replicas: [{ host: '127.0.0.1', port: 8001 }] };
const FLEET = { hosts: [{ name: 'gpu', devices: [0, 1, 2], model: 'm' }] };

/** Loads with an in-memory file system: `files` maps path → content (objects as JSON). */
function load(argv: string[], env: Env = {}, files: Record<string, unknown> = { 'r.json': STATIC }, opts: LoadOptions = {}): RouterConfig {
  const readFile = (p: string): string => {
    const content = files[p];
    if (content === undefined) throw new Error(`ENOENT: no such file or directory, open '${p}'`);
    return typeof content === 'string' ? content : JSON.stringify(content);
  };
  return loadRouterConfig(argv, env, { readFile, ...opts });
}

function problems(argv: string[], env: Env = {}, files?: Record<string, unknown>): ConfigProblem[] {
  try {
    load(argv, env, files);
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  assert.fail('expected a ConfigError');
}

const cfg = ['--config', 'r.json'];

describe('config source', () => {
  it('requires --config', () => {
    assert.deepEqual(problems([]), [{ path: '--config', message: 'required: the config file to load (--replicas FILE and ROUTER_CONFIG also work)' }]);
  });

  it('accepts --replicas as an alias of --config (pypto-serving-router command lines)', () => {
    assert.equal(load(['--replicas', 'r.json']).configPath, 'r.json');
  });

  it('accepts ROUTER_CONFIG', () => {
    assert.equal(load([], { ROUTER_CONFIG: 'r.json' }).replicas.length, 1);
  });

  it('refuses unknown flags, naming them, alongside every other problem', () => {
    const found = problems(['--config', 'r.json', '--gpu', '--request-timeout', '0', '--connect-timeout', '-1']);
    assert.deepEqual(found, [
      { path: '--gpu', message: 'unknown flag (see --help for the list)' },
      { path: '--request-timeout', message: 'must be a number of seconds > 0, got "0"' },
      { path: '--connect-timeout', message: 'must be a number of seconds > 0, got "-1"' },
    ]);
  });
});

describe('precedence: flag > env > file > default', () => {
  const file = { 'r.json': { ...STATIC, routing: { session_ttl: 30 }, health: { interval: 3 } } };

  it('top level (--drain-timeout): flag beats env beats default', () => {
    assert.equal(load(cfg).drainTimeoutMs, 300_000);
    assert.equal(load(cfg, { ROUTER_DRAIN_TIMEOUT: '20' }).drainTimeoutMs, 20_000);
    assert.equal(load([...cfg, '--drain-timeout', '10'], { ROUTER_DRAIN_TIMEOUT: '20' }).drainTimeoutMs, 10_000);
  });

  it('routing (session_ttl): flag beats env beats file beats default', () => {
    assert.equal(load(cfg).routing.sessionTtlMs, 600_000);
    assert.equal(load(cfg, {}, file).routing.sessionTtlMs, 30_000);
    assert.equal(load(cfg, { ROUTER_SESSION_TTL: '40' }, file).routing.sessionTtlMs, 40_000);
    assert.equal(load([...cfg, '--session-ttl=50'], { ROUTER_SESSION_TTL: '40' }, file).routing.sessionTtlMs, 50_000);
  });

  it('health (interval): flag beats env beats file beats default', () => {
    assert.equal(load(cfg).health.intervalMs, 5_000);
    assert.equal(load(cfg, {}, file).health.intervalMs, 3_000);
    assert.equal(load(cfg, { ROUTER_HEALTH_INTERVAL: '0.5' }, file).health.intervalMs, 500);
    assert.equal(load([...cfg, '--health-interval', '0.25'], { ROUTER_HEALTH_INTERVAL: '0.5' }, file).health.intervalMs, 250);
  });

  it('names the env variable whose value is invalid', () => {
    assert.deepEqual(problems(cfg, { ROUTER_REQUEST_TIMEOUT: 'soon', ROUTER_MAX_SESSIONS: '0' }), [
      { path: 'ROUTER_REQUEST_TIMEOUT', message: 'must be a number of seconds > 0, got "soon"' },
      { path: 'ROUTER_MAX_SESSIONS', message: 'must be an integer >= 1, got "0"' },
    ]);
  });

  it('ignores an empty env variable', () => {
    assert.equal(load(cfg, { ROUTER_PORT: '' }).listenPort, 8000);
  });

  it('reads env booleans as 1/0/true/false/yes/no and refuses anything else, naming the variable', () => {
    assert.equal(load(cfg, { ROUTER_DISCARD_STATE: 'yes' }).discardState, true);
    assert.equal(load(cfg, { ROUTER_DISCARD_STATE: '0' }).discardState, false);
    assert.deepEqual(problems(cfg, { ROUTER_DISCARD_STATE: 'sure' }), [
      { path: 'ROUTER_DISCARD_STATE', message: 'must be one of 1, 0, true, false, yes, no, got "sure"' },
    ]);
  });

  it('warns about ROUTER_ variables that are no setting', () => {
    assert.deepEqual(load(cfg, { ROUTER_DRAIN_TIMOUT: '1' }).warnings, [
      'ROUTER_DRAIN_TIMOUT is set but is not a setting of affinity-router (ignored)'.replace('TIMEOUT', 'TIMOUT'),
    ]);
  });
});

describe('defaults and derived values', () => {
  it('has the contract defaults, durations in milliseconds', () => {
    const c = load(cfg);
    assert.deepEqual(
      [c.listenHost, c.listenPort, c.requestTimeoutMs, c.streamIdleTimeoutMs, c.connectTimeoutMs, c.modelsTimeoutMs, c.launchTimeoutMs, c.drainTimeoutMs],
      ['0.0.0.0', 8000, 3_600_000, 600_000, 5_000, 5_000, 600_000, 300_000],
    );
    const { prefixAffinity, prefixBlocks, speedAware, warmHandoff, ...sessions } = c.routing;
    assert.deepEqual(sessions, {
      sessionHeader: 'x-session-id',
      bodyField: 'session_id',
      affinitySlack: 8,
      policy: 'affinity',
      sessionTtlMs: 600_000,
      maxSessions: 100_000,
    });
    assert.deepEqual([prefixAffinity, prefixBlocks, speedAware, warmHandoff], [true, 1_000_000, true, false]);
    assert.deepEqual(c.health, { path: '/health', intervalMs: 5_000, timeoutMs: 2_000, fall: 2, rise: 1, metricsIntervalMs: 5_000 });
    assert.deepEqual(
      [c.maxBodyBytes, c.logLevel, c.stateFile, c.discardState, c.adminToken, c.adminOpen],
      [64 * 1024 * 1024, 'info', undefined, false, undefined, false],
    );
  });

  it('logs json unless stdout is a TTY; --log-format wins', () => {
    assert.equal(load(cfg).logFormat, 'json');
    assert.equal(load(cfg, {}, undefined, { isTty: true }).logFormat, 'pretty');
    assert.equal(load([...cfg, '--log-format', 'json'], {}, undefined, { isTty: true }).logFormat, 'json');
  });

  it('parses --max-body with suffixes and --log-level against pino levels', () => {
    assert.equal(load([...cfg, '--max-body', '2KiB']).maxBodyBytes, 2048);
    assert.deepEqual(
      problems([...cfg, '--log-level', 'loud']).map((p) => p.path),
      ['--log-level'],
    );
  });

  it('strips brackets from an IPv6 listen host', () => {
    assert.equal(load([...cfg, '--host', '[::]']).listenHost, '::');
  });

  it('refuses a local slot on the router port', () => {
    const found = problems(['--config', 'f.json', '--port', '8001'], {}, { 'f.json': FLEET });
    assert.deepEqual(
      found.map((p) => p.path),
      ['hosts[0].port_base'],
    );
  });
});

describe('pool size', () => {
  const fleet = { 'f.json': FLEET };
  const f = ['--config', 'f.json'];

  it('defaults --initial-replicas to 1 with hosts, 0 without, and the ceiling to the slot capacity', () => {
    assert.deepEqual([load(f, {}, fleet).initialReplicas, load(f, {}, fleet).maxReplicas], [1, 3]);
    assert.deepEqual([load(cfg).initialReplicas, load(cfg).maxReplicas], [0, 0]);
  });

  it('caps the ceiling at --max-replicas', () => {
    assert.equal(load([...f, '--max-replicas', '2'], {}, fleet).maxReplicas, 2);
    assert.equal(load([...f, '--max-replicas', '9'], {}, fleet).maxReplicas, 3);
    assert.deepEqual(problems([...f, '--max-replicas', '0'], {}, fleet), [{ path: '--max-replicas', message: 'must be an integer >= 1, got "0"' }]);
  });

  it('refuses --initial-replicas above the ceiling, naming both numbers', () => {
    assert.deepEqual(problems([...f, '--initial-replicas', '5'], {}, fleet), [
      { path: '--initial-replicas', message: '5 exceeds the pool ceiling 3 (declared device slots)' },
    ]);
    assert.deepEqual(problems(f, { ROUTER_INITIAL_REPLICAS: '3', ROUTER_MAX_REPLICAS: '2' }, fleet), [
      { path: 'ROUTER_INITIAL_REPLICAS', message: '3 exceeds the pool ceiling 2 (declared device slots: 3, capped by ROUTER_MAX_REPLICAS 2)' },
    ]);
    assert.equal(load([...f, '--initial-replicas', '3'], {}, fleet).initialReplicas, 3);
  });
});

describe('admin token', () => {
  it('takes ROUTER_ADMIN_TOKEN without a warning', () => {
    const c = load(cfg, { ROUTER_ADMIN_TOKEN: 's3cret' });
    assert.deepEqual([c.adminToken, c.warnings], ['s3cret', []]);
  });

  it('reads ROUTER_ADMIN_TOKEN_FILE, trimming the trailing newline', () => {
    assert.equal(load(cfg, { ROUTER_ADMIN_TOKEN_FILE: '/run/secrets/t' }, { 'r.json': STATIC, '/run/secrets/t': 'from-file\n' }).adminToken, 'from-file');
  });

  it('refuses an unreadable or empty token file, naming the variable and file', () => {
    const unreadable = problems(cfg, { ROUTER_ADMIN_TOKEN_FILE: '/nope' });
    assert.equal(unreadable[0].path, 'ROUTER_ADMIN_TOKEN_FILE');
    assert.match(unreadable[0].message, /cannot read the admin token file "\/nope": ENOENT/);
    assert.deepEqual(problems(cfg, { ROUTER_ADMIN_TOKEN_FILE: '/t' }, { 'r.json': STATIC, '/t': '\n' }), [
      { path: 'ROUTER_ADMIN_TOKEN_FILE', message: 'the admin token in "/t" is empty' },
    ]);
  });

  it('refuses both env forms at once', () => {
    assert.deepEqual(
      problems(cfg, { ROUTER_ADMIN_TOKEN: 'a', ROUTER_ADMIN_TOKEN_FILE: '/t' }).map((p) => p.path),
      ['ROUTER_ADMIN_TOKEN'],
    );
  });

  it('accepts --admin-token with a warning that argv is visible in ps', () => {
    const c = load([...cfg, '--admin-token', 'abc'], { ROUTER_ADMIN_TOKEN: 'env' });
    assert.equal(c.adminToken, 'abc');
    assert.match(c.warnings.join('\n'), /--admin-token: .*visible .* in ps/);
  });

  it('never shows a refused token', () => {
    const found = problems([...cfg, '--admin-token', 'sécret token']);
    assert.equal(found[0].path, '--admin-token');
    assert.doesNotMatch(found[0].message, /sécret/);
  });

  it('opens the admin API only with --admin-open, with a warning', () => {
    const c = load([...cfg, '--admin-open']);
    assert.equal(c.adminOpen, true);
    assert.match(c.warnings.join('\n'), /--admin-open: the admin API .* is open/);
    assert.deepEqual(
      problems([...cfg, '--admin-open'], { ROUTER_ADMIN_TOKEN: 't' }).map((p) => p.path),
      ['--admin-open'],
    );
  });

  it('warns that the admin API is closed when hosts are declared without a token', () => {
    assert.match(load(['--config', 'f.json'], {}, { 'f.json': FLEET }).warnings.join('\n'), /no admin token configured/);
  });
});
