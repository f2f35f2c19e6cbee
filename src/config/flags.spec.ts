import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FLAGS, flagSpec, formatUsage, parseArgv, parseFlagValue } from './flags.js';

const parse = (key: Parameters<typeof flagSpec>[0], raw: string): unknown => {
  const result = parseFlagValue(flagSpec(key), raw);
  return result.ok ? result.value : `error: ${result.message}`;
};

describe('flag table', () => {
  it('gives every flag an env twin ROUTER_<FLAG_IN_UPPER_SNAKE>', () => {
    for (const spec of FLAGS) assert.equal(spec.env, `ROUTER_${spec.key.toUpperCase().replaceAll('-', '_')}`);
    assert.equal(flagSpec('drain-timeout').env, 'ROUTER_DRAIN_TIMEOUT');
  });

  it('has the contract defaults', () => {
    const defaults = Object.fromEntries(FLAGS.map((f) => [f.key, f.default]));
    assert.deepEqual(
      {
        host: defaults.host,
        port: defaults.port,
        hi: defaults['health-interval'],
        ht: defaults['health-timeout'],
        rt: defaults['request-timeout'],
        sit: defaults['stream-idle-timeout'],
        ct: defaults['connect-timeout'],
        mt: defaults['models-timeout'],
        ttl: defaults['session-ttl'],
        ms: defaults['max-sessions'],
        slack: defaults['affinity-slack'],
        lt: defaults['launch-timeout'],
        dt: defaults['drain-timeout'],
        mb: defaults['max-body'],
        ll: defaults['log-level'],
      },
      {
        host: '0.0.0.0',
        port: '8000',
        hi: '5',
        ht: '2',
        rt: '3600',
        sit: '600',
        ct: '5',
        mt: '5',
        ttl: '600',
        ms: '100000',
        slack: '8',
        lt: '600',
        dt: '300',
        mb: '64MiB',
        ll: 'info',
      },
    );
  });

  it('generates --help from the table, with env twins and defaults', () => {
    const usage = formatUsage();
    for (const spec of FLAGS) {
      assert.ok(usage.includes(spec.name), `${spec.name} in usage`);
      assert.ok(usage.includes(spec.env), `${spec.env} in usage`);
    }
    assert.match(usage, /--config, --replicas FILE/);
    assert.match(usage, /default 300; env ROUTER_DRAIN_TIMEOUT/);
    assert.match(usage, /default 600; env ROUTER_SESSION_TTL; file routing.session_ttl/);
  });
});

describe('parseArgv', () => {
  it('accepts --flag value and --flag=value', () => {
    const { values, problems } = parseArgv(['--port', '9000', '--host=127.0.0.1', '--config', 'a.json']);
    assert.deepEqual(problems, []);
    assert.deepEqual(values.port, { raw: '9000', source: '--port' });
    assert.deepEqual(values.host, { raw: '127.0.0.1', source: '--host' });
    assert.deepEqual(values.config, { raw: 'a.json', source: '--config' });
  });

  it('accepts --replicas as an alias of --config', () => {
    assert.deepEqual(parseArgv(['--replicas', 'r.json']).values.config, { raw: 'r.json', source: '--replicas' });
  });

  it('takes a value starting with one dash (so --connect-timeout -1 reaches validation)', () => {
    assert.deepEqual(parseArgv(['--connect-timeout', '-1']).values['connect-timeout'], { raw: '-1', source: '--connect-timeout' });
  });

  it('names an unknown flag', () => {
    assert.deepEqual(
      parseArgv(['--config', 'a.json', '--bogus', '1']).problems.map((p) => p.path),
      ['--bogus', 'argv[3]'],
    );
    assert.match(parseArgv(['--bogus']).problems[0].message, /unknown flag/);
  });

  it('names a flag whose value is missing', () => {
    assert.deepEqual(parseArgv(['--config']).problems, [{ path: '--config', message: 'needs a value (--config FILE)' }]);
    assert.equal(parseArgv(['--port', '--host', 'x']).problems[0].path, '--port');
  });

  it('takes booleans without a value', () => {
    const parsed = parseArgv(['--discard-state', '--admin-open']);
    assert.deepEqual(parsed.problems, []);
    assert.equal(parsed.values['discard-state']?.raw, 'true');
    assert.deepEqual(parseArgv(['--discard-state=false']).problems, [{ path: '--discard-state', message: 'takes no value, got "false"' }]);
  });

  it('refuses stray words', () => {
    assert.deepEqual(
      parseArgv(['serve']).problems.map((p) => p.path),
      ['argv[0]'],
    );
  });

  it('notices --help and -h', () => {
    assert.equal(parseArgv(['--help']).help, true);
    assert.equal(parseArgv(['--port', '1', '-h']).help, true);
    assert.equal(parseArgv(['--port', '1']).help, false);
  });
});

describe('flag values', () => {
  it('parses seconds as milliseconds, refusing <= 0, NaN and words', () => {
    assert.equal(parse('drain-timeout', '1.5'), 1500);
    for (const bad of ['0', '-1', 'NaN', 'abc', '', '5s', 'Infinity', '1e12']) {
      assert.match(String(parse('request-timeout', bad)), /^error: must be /, `"${bad}"`);
    }
    assert.equal(parse('request-timeout', '0'), 'error: must be a number of seconds > 0, got "0"');
  });

  it('parses counts as integers with their minimum', () => {
    assert.equal(parse('affinity-slack', '0'), 0);
    assert.equal(parse('max-sessions', '0'), 'error: must be an integer >= 1, got "0"');
    assert.match(String(parse('max-replicas', '1.5')), /integer >= 1, got "1.5"/);
    assert.match(String(parse('initial-replicas', '-1')), /integer >= 0, got "-1"/);
  });

  it('parses ports 0..65535 (0 = any free port)', () => {
    assert.equal(parse('port', '0'), 0);
    assert.equal(parse('port', '65535'), 65535);
    assert.match(String(parse('port', '65536')), /0\.\.65535 \(0 = any free port\), got "65536"/);
  });

  it('parses byte sizes with KiB/MiB/GiB suffixes', () => {
    assert.equal(parse('max-body', '64MiB'), 64 * 1024 * 1024);
    assert.equal(parse('max-body', '512'), 512);
    assert.equal(parse('max-body', '2KiB'), 2048);
    assert.equal(parse('max-body', '1GiB'), 1024 ** 3);
    assert.match(String(parse('max-body', '64MB')), /KiB, MiB or GiB .* got "64MB"/);
    assert.match(String(parse('max-body', '0')), /^error:/);
  });

  it('parses booleans from 1/0/true/false/yes/no only', () => {
    assert.equal(parse('discard-state', 'yes'), true);
    assert.equal(parse('discard-state', '0'), false);
    assert.equal(parse('admin-open', 'on'), 'error: must be one of 1, 0, true, false, yes, no, got "on"');
  });

  it('parses enums against their choices', () => {
    assert.equal(parse('log-level', 'debug'), 'debug');
    assert.equal(parse('log-level', 'verbose'), 'error: must be one of fatal, error, warn, info, debug, trace, got "verbose"');
    assert.equal(parse('log-format', 'pretty'), 'pretty');
  });

  it('checks strings: listen host, header name, health path', () => {
    assert.equal(parse('host', '::'), '::');
    assert.match(String(parse('host', 'not a host')), /hostname, IPv4 or IPv6/);
    assert.match(String(parse('session-header', 'x session')), /HTTP header name/);
    assert.match(String(parse('health-path', 'health')), /starting with "\/"/);
    assert.equal(parse('state-file', ''), 'error: must not be empty');
  });
});
