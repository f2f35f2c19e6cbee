/**
 * deploy/ must match the app (issue 5, point 6): the Kubernetes manifests are parsed with `yaml`
 * and the Dockerfile as text, then checked against the flag table, the real config loader and a
 * running router: probe paths are real routes, ports agree with the `--port` default, every
 * `ROUTER_*` name is a setting, the termination grace covers the drain, and the image runs
 * `npm run start:prod` as a non-root user with the config where the Deployment mounts it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { loadRouterConfig } from '../../src/config/config.loader.js';
import { FLAGS, flagSpec, parseArgv } from '../../src/config/flags.js';
import type { RouterConfig } from '../../src/config/router-config.js';
import { simRequest, spawnSim, stopAllSims } from '../support/sim-process.js';
import { adminCall, startTestRouter, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';

/** The compiled test lives at dist-test/test/e2e/: three levels below the repository root. */
const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const K8S_DIR = join(REPO_ROOT, 'deploy/k8s');
const DOCKERFILE = join(REPO_ROOT, 'deploy/Dockerfile');
/** The `--port` default from the flag table (never hard-coded here). */
const DEFAULT_PORT = Number(flagSpec('port').default);
/** Env names the app reads: the twin of every flag (ROUTER_ADMIN_TOKEN(_FILE) included). */
const SETTING_ENVS = new Set([...FLAGS.map((f) => f.env), 'ROUTER_ADMIN_TOKEN', 'ROUTER_ADMIN_TOKEN_FILE']);

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A scalar of a manifest as text; anything else fails the test, naming where it is. */
function scalar(v: unknown, where: string): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  assert.fail(`${where}: expected a string, got ${JSON.stringify(v)}`);
}

/** The value at a dotted path (`spec.template.spec`), or an error naming what is missing where. */
function at(root: unknown, path: string, where: string): unknown {
  let cur = root;
  for (const key of path.split('.')) {
    if (!isObj(cur) || cur[key] === undefined) throw new Error(`${where}: ${path} is missing`);
    cur = cur[key];
  }
  return cur;
}
const objAt = (r: unknown, p: string, w: string): Obj => {
  const v = at(r, p, w);
  if (!isObj(v)) throw new Error(`${w}: ${p} is not a mapping`);
  return v;
};
const listAt = (r: unknown, p: string, w: string): unknown[] => {
  const v = at(r, p, w);
  if (!Array.isArray(v)) throw new Error(`${w}: ${p} is not a list`);
  return v;
};

/** One Kubernetes resource from deploy/k8s. */
interface Resource {
  readonly file: string;
  readonly kind: string;
  readonly name: string;
  readonly body: Obj;
}

function loadManifests(): Resource[] {
  const out: Resource[] = [];
  for (const file of readdirSync(K8S_DIR)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()) {
    for (const doc of parseAllDocuments(readFileSync(join(K8S_DIR, file), 'utf8'))) {
      assert.equal(doc.errors.length, 0, `deploy/k8s/${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const body: unknown = doc.toJS();
      if (body === null || body === undefined) continue;
      if (!isObj(body)) throw new Error(`deploy/k8s/${file}: a document is not a mapping`);
      out.push({ file, kind: String(at(body, 'kind', file)), name: String(at(body, 'metadata.name', file)), body });
    }
  }
  return out;
}

/** One instruction of the Dockerfile (continuations joined, comments dropped), with its stage index. */
interface Instruction {
  readonly op: string;
  readonly args: string;
  readonly stage: number;
}

function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let stage = -1;
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('#') || (line === '' && pending === '')) continue;
    pending += (pending ? ' ' : '') + line.replace(/\\$/, '').trim();
    if (line.endsWith('\\')) continue;
    const m = /^(\S+)\s*(.*)$/.exec(pending);
    pending = '';
    if (m === null) continue;
    const op = m[1].toUpperCase();
    if (op === 'FROM') stage += 1;
    out.push({ op, args: m[2], stage });
  }
  return out;
}

/** A JSON-form (exec form) instruction argument as a string list. */
function execForm(i: Instruction | undefined, op: string): string[] {
  if (i === undefined) throw new Error(`deploy/Dockerfile: no ${op} instruction`);
  const v: unknown = JSON.parse(i.args);
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new Error(`deploy/Dockerfile: ${op} is not a JSON string list`);
  return v;
}

/** `64m` (nginx size: k/m/g are powers of 1024) in bytes. */
function nginxSize(text: string): number {
  const m = /^(\d+)([kKmMgG]?)$/.exec(text);
  if (m === null) throw new Error(`not an nginx size: ${text}`);
  return Number(m[1]) * 1024 ** ' kmg'.indexOf((m[2] || ' ').toLowerCase());
}

const manifests = loadManifests();
const one = (kind: string): Resource => {
  const found = manifests.filter((r) => r.kind === kind);
  assert.equal(found.length, 1, `deploy/k8s must declare exactly one ${kind} (found ${found.length})`);
  return found[0];
};
const deployment = one('Deployment');
const service = one('Service');
const ingress = one('Ingress');
const podSpec = objAt(deployment.body, 'spec.template.spec', deployment.file);
const containers = listAt(podSpec, 'containers', deployment.file);
assert.equal(containers.length, 1, 'the Deployment runs exactly one container');
const container = containers[0] as Obj;
const args = listAt(container, 'args', deployment.file).map(String);
const ports = listAt(container, 'ports', deployment.file).filter(isObj);
const containerPort = Number(at(ports[0], 'containerPort', deployment.file));
const probes = (['readinessProbe', 'livenessProbe', 'startupProbe'] as const).filter((p) => container[p] !== undefined);

/** A port given by number or by container port name, as the container port number. */
function containerPortOf(p: unknown, where: string): number {
  if (typeof p === 'number') return p;
  const named = ports.find((x) => x['name'] === p);
  if (named === undefined) throw new Error(`${where}: port ${String(p)} names no container port`);
  return Number(named['containerPort']);
}

/** The resource a Deployment reference points at (`Secret`/`ConfigMap` by name). */
function referenced(kind: string, name: unknown, where: string): Obj {
  const r = manifests.find((x) => x.kind === kind && x.name === name);
  if (r === undefined) throw new Error(`${where}: no ${kind} named ${String(name)} in deploy/k8s`);
  return r.body;
}

/** A key of a Secret/ConfigMap, from `stringData` or (base64) `data`. */
function keyOf(body: Obj, key: string, where: string): string {
  const s = isObj(body['stringData']) ? body['stringData'][key] : undefined;
  if (typeof s === 'string') return s;
  const d = isObj(body['data']) ? body['data'][key] : undefined;
  if (typeof d !== 'string') throw new Error(`${where}: key ${key} is missing`);
  return body['kind'] === 'Secret' ? Buffer.from(d, 'base64').toString('utf8') : d;
}

/** The container's environment, resolving Secret and ConfigMap references from the manifests. */
function containerEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of listAt(container, 'env', deployment.file).filter(isObj)) {
    const name = String(e['name']);
    const where = `${deployment.file}: env ${name}`;
    if (e['value'] !== undefined) env[name] = scalar(e['value'], where);
    else if (isObj(e['valueFrom']) && isObj(e['valueFrom']['secretKeyRef'])) {
      const ref = e['valueFrom']['secretKeyRef'];
      env[name] = keyOf(referenced('Secret', ref['name'], where), String(ref['key']), where);
    } else if (isObj(e['valueFrom']) && isObj(e['valueFrom']['configMapKeyRef'])) {
      const ref = e['valueFrom']['configMapKeyRef'];
      env[name] = keyOf(referenced('ConfigMap', ref['name'], where), String(ref['key']), where);
    } else throw new Error(`${where}: neither value nor a Secret/ConfigMap key`);
  }
  return env;
}

/** Reads a file as the container would see it: only through a ConfigMap volume mount. */
function readMounted(path: string): string {
  for (const m of listAt(container, 'volumeMounts', deployment.file).filter(isObj)) {
    const dir = String(m['mountPath']).replace(/\/$/, '');
    if (!path.startsWith(`${dir}/`)) continue;
    const vol = listAt(podSpec, 'volumes', deployment.file)
      .filter(isObj)
      .find((v) => v['name'] === m['name']);
    if (vol === undefined || !isObj(vol['configMap'])) throw new Error(`${path}: the volume mounted at ${dir} is not a ConfigMap`);
    const where = `${path} (volume ${String(m['name'])})`;
    return keyOf(referenced('ConfigMap', vol['configMap']['name'], where), path.slice(dir.length + 1), where);
  }
  throw new Error(`${path}: no volume of the Deployment is mounted there`);
}

/** The router config the container would start with: its args, env and mounted files, through the real loader. */
function containerConfig(): RouterConfig {
  return loadRouterConfig(args, containerEnv(), { readFile: readMounted });
}

const dockerfile = parseDockerfile(readFileSync(DOCKERFILE, 'utf8'));
const finalStage = Math.max(...dockerfile.map((i) => i.stage));
const inFinal = (op: string): Instruction[] => dockerfile.filter((i) => i.stage === finalStage && i.op === op);
const configPathOf = (argv: readonly string[], where: string): string => {
  const parsed = parseArgv(argv);
  assert.deepEqual(parsed.problems, [], `${where}: ${argv.join(' ')} is not a valid router command line`);
  const c = parsed.values.config?.raw;
  if (c === undefined) throw new Error(`${where}: no --config in ${argv.join(' ')}`);
  return c;
};

describe('deploy/k8s manifests match the app', () => {
  it('load through the real config loader: args, Secret env and the ConfigMap mounted at the --config path', () => {
    const cfg = containerConfig();
    assert.equal(cfg.adminToken !== undefined, true, 'the Deployment must give the router an admin token');
    assert.equal(cfg.listenPort, containerPort, `the router listens on ${cfg.listenPort}, the container port is ${containerPort}`);
  });

  it('use the --port default as the container port, and probes, Service and Ingress reach it', () => {
    assert.equal(containerPort, DEFAULT_PORT, `containerPort ${containerPort} must equal the --port default ${DEFAULT_PORT}`);
    for (const p of probes) {
      assert.equal(containerPortOf(at(container, `${p}.httpGet.port`, deployment.file), p), containerPort, `${p} must probe the container port`);
    }
    const svcPorts = listAt(service.body, 'spec.ports', service.file).filter(isObj);
    for (const sp of svcPorts)
      assert.equal(containerPortOf(sp['targetPort'], service.file), containerPort, `Service port ${String(sp['name'])} must target the container port`);
    const selector = objAt(service.body, 'spec.selector', service.file);
    const labels = objAt(deployment.body, 'spec.template.metadata.labels', deployment.file);
    for (const [k, v] of Object.entries(selector)) assert.equal(labels[k], v, `the Service selector ${k}=${String(v)} must match the pod labels`);
    const backends = listAt(ingress.body, 'spec.rules', ingress.file).flatMap((r) => listAt(r, 'http.paths', ingress.file));
    assert.ok(backends.length > 0, 'the Ingress routes nothing');
    for (const b of backends) {
      assert.equal(at(b, 'backend.service.name', ingress.file), service.name, 'the Ingress must send to the router Service');
      const port = objAt(b, 'backend.service.port', ingress.file);
      assert.ok(
        svcPorts.some((sp) => sp['name'] === port['name'] || sp['port'] === port['number']),
        `Ingress backend port ${JSON.stringify(port)} is not a port of the Service`,
      );
    }
    const scrape = objAt(deployment.body, 'spec.template.metadata.annotations', deployment.file)['prometheus.io/port'];
    if (scrape !== undefined) assert.equal(Number(scrape), containerPort, 'prometheus.io/port must be the container port');
  });

  it('use only ROUTER_* names that are settings of the router', () => {
    const texts = [...manifests.map((r) => JSON.stringify(r.body)), readFileSync(DOCKERFILE, 'utf8')];
    const used = new Set(texts.flatMap((t) => t.match(/\bROUTER_[A-Z0-9_]+\b/g) ?? []));
    assert.ok(used.has('ROUTER_ADMIN_TOKEN'), 'the manifests must pass ROUTER_ADMIN_TOKEN from the Secret');
    for (const name of used) assert.ok(SETTING_ENVS.has(name), `${name} is not an environment twin of any flag in src/config/flags.ts`);
  });

  it('give a termination grace above preStop plus the --drain-timeout of the args', () => {
    const graceS = Number(at(podSpec, 'terminationGracePeriodSeconds', deployment.file));
    const drainS = containerConfig().drainTimeoutMs / 1000;
    assert.ok(args.includes('--drain-timeout'), 'the Deployment must pass --drain-timeout explicitly');
    const pre = isObj(container['lifecycle']) ? container['lifecycle']['preStop'] : undefined;
    const sleepS = isObj(pre) && isObj(pre['exec']) ? Number(listAt(pre, 'exec.command', deployment.file).at(-1)) : 0;
    // docs/operations.md's rule: preStop + drain + the 10 s SIGKILL escalation of a launched
    // replica's stop, and a margin above that.
    assert.ok(
      graceS > sleepS + drainS + 10,
      `terminationGracePeriodSeconds ${graceS} must exceed preStop ${sleepS} s + --drain-timeout ${drainS} s + 10 s stop escalation`,
    );
  });

  it('configure the ingress for long streams and the --max-body limit', () => {
    const cfg = containerConfig();
    const ann = objAt(ingress.body, 'metadata.annotations', ingress.file);
    const a = (k: string): string => scalar(ann[`nginx.ingress.kubernetes.io/${k}`] ?? '', `${ingress.file}: annotation ${k}`);
    const longest = Math.max(cfg.requestTimeoutMs, cfg.streamIdleTimeoutMs) / 1000;
    assert.ok(Number(a('proxy-read-timeout')) >= longest, `proxy-read-timeout "${a('proxy-read-timeout')}" must be >= ${longest} s`);
    assert.ok(Number(a('proxy-send-timeout')) >= longest, `proxy-send-timeout "${a('proxy-send-timeout')}" must be >= ${longest} s`);
    assert.equal(a('proxy-buffering'), 'off', 'proxy-buffering must be off so SSE chunks are relayed at once');
    assert.equal(
      nginxSize(a('proxy-body-size')),
      cfg.maxBodyBytes,
      `proxy-body-size "${a('proxy-body-size')}" must equal --max-body (${cfg.maxBodyBytes} bytes)`,
    );
  });
});

describe('deploy/Dockerfile matches the app', () => {
  it('builds on node:20-slim and runs npm run start:prod with production dependencies only', () => {
    for (const f of dockerfile.filter((i) => i.op === 'FROM')) assert.match(f.args, /^node:20-slim(\s|$)/, `FROM ${f.args}`);
    assert.deepEqual(execForm(inFinal('ENTRYPOINT').at(-1), 'ENTRYPOINT'), ['npm', 'run', 'start:prod', '--']);
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    assert.match(pkg.scripts?.['start:prod'] ?? '', /\bnode dist\/main\.js\b/, 'package.json start:prod must run dist/main.js');
    assert.ok(
      inFinal('RUN').some((r) => /\bnpm ci\b/.test(r.args) && /--omit=dev\b/.test(r.args)),
      'the runtime stage must run npm ci --omit=dev',
    );
    // Without --ignore-scripts the postinstall build (tsc, a dev dependency) runs and fails there.
    assert.ok(
      inFinal('RUN').some((r) => /\bnpm ci\b/.test(r.args) && /--ignore-scripts\b/.test(r.args)),
      'the runtime npm ci must skip install scripts',
    );
    assert.ok(
      inFinal('COPY').some((c) => /--from=\S+/.test(c.args) && /\bdist\b/.test(c.args)),
      'the runtime stage must copy the built dist/',
    );
    assert.deepEqual(
      inFinal('STOPSIGNAL').map((s) => s.args),
      ['SIGTERM'],
    );
    assert.deepEqual(
      inFinal('EXPOSE').map((e) => Number(e.args)),
      [DEFAULT_PORT],
      `EXPOSE must be the --port default ${DEFAULT_PORT}`,
    );
  });

  it('runs as a non-root user', () => {
    const user = inFinal('USER').at(-1)?.args.split(':')[0];
    assert.ok(user !== undefined, 'the runtime stage has no USER');
    assert.ok(user !== 'root' && user !== '0', `USER ${user} is root`);
  });

  it('reads the config at the path the Deployment mounts and passes', () => {
    const cmdPath = configPathOf(execForm(inFinal('CMD').at(-1), 'CMD'), 'Dockerfile CMD');
    assert.equal(configPathOf(args, 'Deployment args'), cmdPath, 'the Deployment --config must be the Dockerfile CMD --config');
    assert.doesNotThrow(() => readMounted(cmdPath), `${cmdPath} must be a key of the ConfigMap volume`);
  });
});

describe('deploy probe paths are real routes of a running router', () => {
  let router: TestRouter;
  before(async () => {
    const sim = await spawnSim({ name: 'p0' });
    router = await startTestRouter({ replicas: [{ name: 'p0', host: '127.0.0.1', port: sim.port }] }, [], { ROUTER_ADMIN_TOKEN: TEST_TOKEN });
  });
  after(async () => {
    await router?.close();
    await stopAllSims();
  });
  const path = (p: string): string => String(at(container, `${p}.httpGet.path`, deployment.file));

  it('answers 200 on every probe path, the HEALTHCHECK path and the scrape path of a healthy router', async () => {
    const paths = new Set(probes.map(path));
    const health = inFinal('HEALTHCHECK').at(-1);
    if (health !== undefined) paths.add(/'(\/[A-Za-z0-9_-]+)'/.exec(health.args)?.[1] ?? 'HEALTHCHECK without a path');
    const scrape = objAt(deployment.body, 'spec.template.metadata.annotations', deployment.file)['prometheus.io/path'];
    if (scrape !== undefined) paths.add(scalar(scrape, `${deployment.file}: prometheus.io/path`));
    await waitFor(async () => (await simRequest(`${router.url}/readyz`)).status === 200, 10_000, '/readyz 200');
    for (const p of paths) assert.equal((await simRequest(`${router.url}${p}`)).status, 200, `GET ${p}`);
  });

  it('fails readiness but not liveness when no replica is routable', async () => {
    assert.equal((await adminCall(router, 'PATCH', '/replicas/p0', { body: { draining: true } })).status, 200);
    try {
      assert.equal((await simRequest(`${router.url}${path('readinessProbe')}`)).status, 503, 'readinessProbe must fail with no routable replica');
      assert.equal((await simRequest(`${router.url}${path('livenessProbe')}`)).status, 200, 'livenessProbe must not restart a router that waits for replicas');
    } finally {
      assert.equal((await adminCall(router, 'PATCH', '/replicas/p0', { body: { draining: false } })).status, 200);
    }
  });
});
