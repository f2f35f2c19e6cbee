/** Config-file rules (contract §2): one test per rule, asserting the exact path and the named value. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, type ConfigProblem } from './config-error.js';
import { loadRouterConfig } from './config.loader.js';
import type { RouterConfig } from './router-config.js';

type Json = Record<string, unknown>;
const replica = (over: Json = {}): Json => ({ host: '127.0.0.1', port: 8001, ...over });
const host = (over: Json = {}): Json => ({ name: 'node', devices: [0, 1], model: '/models/m', ...over });

/** Loads `file` (a JSON value, or raw text) as `name`. */
function load(file: unknown, name = 'router.json', stored = name): RouterConfig {
  const text = typeof file === 'string' ? file : JSON.stringify(file);
  const readFile = (p: string): string => {
    if (p !== stored) throw new Error(`ENOENT: no such file or directory, open '${p}'`);
    return text;
  };
  return loadRouterConfig(['--config', name], {}, { readFile });
}

function problems(file: unknown, name?: string, stored?: string): ConfigProblem[] {
  try {
    load(file, name, stored);
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  assert.fail('expected a ConfigError');
}

/** Asserts exactly one problem, at `path`, whose message matches. */
function rejects(file: unknown, path: string, message: RegExp): void {
  const found = problems(file);
  assert.deepEqual(
    found.map((p) => p.path),
    [path],
    JSON.stringify(found),
  );
  assert.match(found[0].message, message);
}

describe('config file: format', () => {
  it('reports an unreadable file at path config, naming the file', () => {
    const found = problems({ replicas: [replica()] }, 'router.json', 'elsewhere.json');
    assert.equal(found[0].path, 'config');
    assert.match(found[0].message, /cannot read "router.json": ENOENT/);
  });

  it('reports invalid JSON with line and column', () => {
    rejects('{\n  "replicas": [\n    {"host": "a", "port": 1},,\n  ]\n}', 'config', /"router.json" is not valid JSON: .*\(line 3, column 30\)/);
  });

  it('reads YAML when the name ends in .yaml or .yml, and reports where YAML is invalid', () => {
    const yaml = 'replicas:\n  - host: a\n    port: 8001\nrouting:\n  session_ttl: 30\n';
    assert.equal(load(yaml, 'r.yaml').routing.sessionTtlMs, 30_000);
    assert.equal(load(yaml, 'r.yml').replicas[0].name, 'a:8001');
    const found = problems('replicas:\n  - host: a\n  port: [1\n', 'r.yml');
    assert.equal(found[0].path, 'config');
    assert.match(found[0].message, /"r.yml" is not valid YAML: .*line \d+, column \d+/);
  });

  it('refuses a file that is not an object', () => {
    rejects([replica()], 'config', /must be a JSON\/YAML object, got \[/);
  });

  it('allows only replicas, hosts, routing, health, autoscale and workers at the top level', () => {
    rejects({ replicas: [replica()], nodes: [] }, 'nodes', /unknown field \(allowed here: replicas, hosts, routing, health, autoscale, workers\)/);
  });

  it('takes workers as a count or "auto", and names a bad value', () => {
    assert.equal(load(JSON.stringify({ replicas: [replica()], workers: 3 })).workers, 3);
    assert.ok(load(JSON.stringify({ replicas: [replica()], workers: 'auto' })).workers >= 1);
    assert.equal(load(JSON.stringify({ replicas: [replica()] })).workers, 1);
    rejects({ replicas: [replica()], workers: 0 }, 'workers', /must be a number of worker processes 1\.\.256 or "auto", got 0/);
    rejects({ replicas: [replica()], workers: 'many' }, 'workers', /1\.\.256 or "auto", got "many"/);
    const readFile = (): string => JSON.stringify({ replicas: [replica()], workers: 2 });
    assert.equal(loadRouterConfig(['--config', 'r.json', '--workers', 'auto'], {}, { readFile }).workers >= 1, true, 'the flag wins over the file');
    assert.equal(loadRouterConfig(['--config', 'r.json'], { ROUTER_WORKERS: '4' }, { readFile }).workers, 4);
    assert.throws(
      () => loadRouterConfig(['--config', 'r.json', '--workers', '0'], {}, { readFile }),
      (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.path === '--workers' && /1\.\.256 or auto, got "0"/.test(p.message)),
    );
  });

  it('needs at least one replica or host', () => {
    rejects({ replicas: [], hosts: [] }, 'config', /declares neither a replica nor a host/);
    rejects({}, 'config', /"router.json" declares neither a replica nor a host/);
    rejects({ hosts: null, routing: { session_ttl: 5 } }, 'config', /declares neither/);
  });

  it('refuses unknown fields anywhere, at their own path', () => {
    const found = problems({
      replicas: [replica({ device: 1 })],
      hosts: [host({ gpus: [0] })],
      routing: { ttl: 1 },
      health: { url: '/x' },
    });
    assert.deepEqual(found.map((p) => p.path).sort(), ['health.url', 'hosts[0].gpus', 'replicas[0].device', 'routing.ttl']);
  });

  it('refuses __proto__, constructor and prototype keys as unknown fields', () => {
    rejects('{"replicas": [{"host": "a", "port": 1, "__proto__": {"port": 2}}]}', 'replicas[0].__proto__', /^unknown field$/);
    rejects('{"replicas": [{"host": "a", "port": 1, "constructor": 1}]}', 'replicas[0].constructor', /^unknown field$/);
    rejects('{"hosts": [{"devices": [0], "model": "m", "env": {"prototype": "x"}}]}', 'hosts[0].env.prototype', /^unknown field$/);
  });

  it('reports every problem at once, not just the first', () => {
    const found = problems({ replicas: [replica({ port: '8000' }), replica({ scheme: 'ftp' })], hosts: [host({ devices: [] })] });
    assert.deepEqual(
      found.map((p) => p.path),
      ['replicas[0].port', 'replicas[1].scheme', 'hosts[0].devices'],
    );
  });

  it('reports a list element that is not an object at its index', () => {
    rejects({ replicas: [replica(), 'r1:8000'] }, 'replicas[1]', /must be an object, got "r1:8000"/);
  });
});

describe('config file: max_inflight', () => {
  it('takes max_inflight on a replica and on a host, and refuses one below 1', () => {
    const config = load({ replicas: [replica({ port: 7001, max_inflight: 4 })], hosts: [host({ max_inflight: 256 })] });
    assert.equal(config.replicas[0].maxInflight, 4);
    assert.equal(config.hosts[0].maxInflight, 256);
    assert.equal(load({ replicas: [replica()] }).replicas[0].maxInflight, undefined);
    rejects({ replicas: [replica({ max_inflight: 0 })] }, 'replicas[0].max_inflight', /integer >= 1, got 0/);
    rejects({ hosts: [host({ max_inflight: 1.5 })] }, 'hosts[0].max_inflight', /integer >= 1, got 1.5/);
  });
});

describe('config file: models (contract §4.3)', () => {
  it('takes the models a static replica declares, and refuses an empty list, a non-string, an empty id or a duplicate', () => {
    assert.deepEqual(load({ replicas: [replica({ models: ['llama-8b', 'sql-lora'] })] }).replicas[0].models, ['llama-8b', 'sql-lora']);
    assert.equal(load({ replicas: [replica()] }).replicas[0].models, undefined);
    rejects({ replicas: [replica({ models: [] })] }, 'replicas[0].models', /non-empty array of model ids, got \[\]/);
    rejects({ replicas: [replica({ models: 'llama' })] }, 'replicas[0].models', /non-empty array of model ids, got "llama"/);
    rejects({ replicas: [replica({ models: ['a', 3] })] }, 'replicas[0].models', /element \[1\] is 3/);
    rejects({ replicas: [replica({ models: [''] })] }, 'replicas[0].models', /element \[0\] is ""/);
    rejects({ replicas: [replica({ models: ['a', 'a'] })] }, 'replicas[0].models', /model "a" is listed more than once/);
  });
});

describe('config file: names', () => {
  it('refuses names outside [A-Za-z0-9._:-]{1,64}', () => {
    rejects({ replicas: [replica({ name: 'bad name' })] }, 'replicas[0].name', /1-64 characters .* got "bad name"/);
    rejects({ hosts: [host({ name: 'x'.repeat(65) })] }, 'hosts[0].name', /got "x{65}/);
  });

  it('names a replica host:port by default, also when its name is null', () => {
    const config = load({ replicas: [replica({ port: 8001 }), replica({ port: 8003, name: null }), replica({ host: '[::1]', port: 8004 })] });
    assert.deepEqual(
      config.replicas.map((r) => r.name),
      ['127.0.0.1:8001', '127.0.0.1:8003', '::1:8004'],
    );
  });

  it('names a host host<i> by default', () => {
    const config = load({ hosts: [host(), host({ name: undefined, port_base: 9001 }), host({ name: null, port_base: 9101 })] });
    assert.deepEqual(
      config.hosts.map((h) => h.name),
      ['node', 'host1', 'host2'],
    );
  });

  it('refuses an empty name on a replica or a host, naming the path (contract §2)', () => {
    rejects({ replicas: [replica(), replica({ port: 8002, name: '' })] }, 'replicas[1].name', /must not be empty/);
    rejects({ hosts: [host(), host({ name: '', port_base: 9101 })] }, 'hosts[1].name', /must not be empty/);
  });

  it('refuses duplicate replica names, naming the first owner', () => {
    rejects({ replicas: [replica({ name: 'r' }), replica({ name: 'r', port: 9 })] }, 'replicas[1].name', /"r" is already the name of replicas\[0\]/);
    rejects({ replicas: [replica(), replica()] }, 'replicas[1].name', /"127.0.0.1:8001" \(host:port\) is already the name of replicas\[0\]/);
  });

  it('refuses duplicate host names', () => {
    rejects({ hosts: [host(), host({ port_base: 9001 })] }, 'hosts[1].name', /"node" is already the name of hosts\[0\]/);
  });

  it('refuses a static replica named like a device slot', () => {
    rejects(
      { replicas: [replica({ name: 'node-d1', port: 7001 })], hosts: [host()] },
      'replicas[0].name',
      /"node-d1" is already the name of a device slot of hosts\[0\] \(node\)/,
    );
  });
});

describe('config file: replicas', () => {
  it('requires host to be a hostname, IPv4 or IPv6 address', () => {
    rejects({ replicas: [replica({ host: '' })] }, 'replicas[0].host', /non-empty string, got ""/);
    rejects({ replicas: [replica({ host: 'http://a' })] }, 'replicas[0].host', /hostname, IPv4 or IPv6 address, got "http:\/\/a"/);
    rejects({ replicas: [replica({ host: 10 })] }, 'replicas[0].host', /got 10/);
    rejects({ replicas: [replica({ host: '300.1.1.1' })] }, 'replicas[0].host', /got "300.1.1.1"/);
    const ok = load({ replicas: [replica({ host: 'fd00::1' }), replica({ host: '[fd00::2]' }), replica({ host: 'gpu-01.lab' })] });
    assert.deepEqual(
      ok.replicas.map((r) => r.host),
      ['fd00::1', 'fd00::2', 'gpu-01.lab'],
    );
  });

  it('requires port to be an integer 1..65535, never a string or boolean', () => {
    for (const port of ['8000', true, 0, 70000, 1.5, null]) {
      rejects(
        { replicas: [replica({ port })] },
        'replicas[0].port',
        new RegExp(`integer in 1\\.\\.65535, got ${JSON.stringify(port)?.replace(/[.]/g, '\\.')}`),
      );
    }
    rejects({ replicas: [{ host: 'a' }] }, 'replicas[0].port', /got nothing/);
  });

  it('accepts scheme http or https, default http', () => {
    rejects({ replicas: [replica({ scheme: 'ftp' })] }, 'replicas[0].scheme', /one of "http", "https", got "ftp"/);
    const config = load({ replicas: [replica(), replica({ port: 2, scheme: 'https' })] });
    assert.deepEqual(
      config.replicas.map((r) => r.scheme),
      ['http', 'https'],
    );
  });

  it('accepts ca_file only on an https replica', () => {
    rejects({ replicas: [replica({ ca_file: '/ca.pem' })] }, 'replicas[0].ca_file', /only used with "scheme": "https", but this replica uses http/);
    rejects({ replicas: [replica({ scheme: 'https', ca_file: 5 })] }, 'replicas[0].ca_file', /non-empty string, got 5/);
    assert.equal(load({ replicas: [replica({ scheme: 'https', ca_file: '/ca.pem' })] }).replicas[0].caFile, '/ca.pem');
  });

  it('takes tls_verify as a boolean, default true', () => {
    rejects({ replicas: [replica({ tls_verify: 'no' })] }, 'replicas[0].tls_verify', /true or false, got "no"/);
    assert.equal(load({ replicas: [replica()] }).replicas[0].tlsVerify, true);
  });
});

describe('config file: routing and health', () => {
  it('checks routing values with their paths', () => {
    rejects({ replicas: [replica()], routing: { session_ttl: 0 } }, 'routing.session_ttl', /seconds > 0, got 0/);
    rejects({ replicas: [replica()], routing: { affinity_slack: -1 } }, 'routing.affinity_slack', /integer >= 0, got -1/);
    rejects({ replicas: [replica()], routing: { max_sessions: 0.5 } }, 'routing.max_sessions', /integer >= 1, got 0.5/);
    rejects({ replicas: [replica()], routing: { session_header: 'x session' } }, 'routing.session_header', /HTTP header name, got "x session"/);
    rejects({ replicas: [replica()], routing: { body_field: '' } }, 'routing.body_field', /non-empty string/);
  });

  it('checks health values with their paths', () => {
    rejects({ replicas: [replica()], health: { path: 'health' } }, 'health.path', /starting with "\/".*got "health"/);
    rejects({ replicas: [replica()], health: { interval: 'fast' } }, 'health.interval', /seconds > 0, got "fast"/);
    rejects({ replicas: [replica()], health: { timeout: -2 } }, 'health.timeout', /got -2/);
    rejects({ replicas: [replica()], health: { fall: 0 } }, 'health.fall', /integer >= 1, got 0/);
    rejects({ replicas: [replica()], health: { rise: true } }, 'health.rise', /got true/);
  });

  it('applies the file values, lower-casing the session header, defaults elsewhere', () => {
    const config = load({ replicas: [replica()], routing: { session_header: 'X-Conversation', body_field: 'conv' }, health: { path: '/ready', fall: 3 } });
    assert.equal(config.routing.sessionHeader, 'x-conversation');
    assert.equal(config.routing.bodyField, 'conv');
    assert.deepEqual(config.health, { path: '/ready', intervalMs: 5000, timeoutMs: 2000, fall: 3, rise: 1, metricsIntervalMs: 5000 });
  });
});
