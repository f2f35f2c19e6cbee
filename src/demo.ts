/**
 * `npm start`: the bundled demo. Runs the router with config/demo.json (two local hosts of two
 * device slots each, one per simulated model, whose command is the replica simulator), launches
 * one replica of each model through the admin API, and prints how to talk to it. Ctrl-C drains and
 * stops everything it launched.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfigOrExit } from './config/cli.js';

const here = dirname(fileURLToPath(import.meta.url));

/**
 * The project root: the nearest directory above this file holding config/demo.json (`dist/..`
 * for `npm start`, `dist-test/src/../..` when the tests run the compiled test tree). The demo
 * config's relative paths (`config/demo.json`, `dist/sim/replica.js`) are relative to it.
 */
function projectRoot(): string {
  for (let dir = dirname(here); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'config', 'demo.json'))) return dir;
    if (dirname(dir) === dir) return join(here, '..');
  }
}

/** A URL a local curl can use for the address the router listens on. */
function clientUrl(host: string, port: number): string {
  const h = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
}

const root = projectRoot();
process.chdir(root);
const token = process.env['ROUTER_ADMIN_TOKEN'] ?? randomBytes(12).toString('hex');
process.env['ROUTER_ADMIN_TOKEN'] = token;
// The demo's settings first, the user's flags after them: the parser keeps the last occurrence,
// so `npm start -- --port=9000 --host 0.0.0.0` overrides them whichever spelling is used.
const argv = [
  '--config',
  'config/demo.json',
  '--host',
  '127.0.0.1',
  '--port',
  '8000',
  '--initial-replicas',
  '0',
  '--log-format',
  'pretty',
  ...process.argv.slice(2),
];
// The address printed is the one the router will listen on, read by the router's own loader
// (a bad flag exits 2 here, exactly as main.js would, before any banner).
const config = loadConfigOrExit(argv, process.env);
process.argv = [process.argv[0], join(here, 'main.js'), ...argv];

/** Each host's model (`served_model_name`, else `model`), once: the demo launches one replica of each. */
const MODELS = [...new Set(config.hosts.map((h) => h.servedModelName ?? h.model).filter((m) => m !== undefined))];

const url = clientUrl(config.listenHost, config.listenPort);
process.stdout.write(`
affinity-router demo: ${MODELS.length} simulated models (${MODELS.join(', ')}), one replica of each launched into ${config.slots.length} device slots (config/demo.json)

  router      ${url}            admin token: ${token}
  chat        curl -s ${url}/v1/chat/completions -H 'content-type: application/json' \\
                -d '{"model":"sim-model","session_id":"demo-1","messages":[{"role":"user","content":"hello"}]}' -i
  coder       curl -s ${url}/v1/chat/completions -H 'content-type: application/json' \\
                -d '{"model":"sim-coder","messages":[{"role":"user","content":"write a loop"}]}' -i
  LoRA        curl -s ${url}/v1/completions -d '{"model":"sim-coder-sql","prompt":"SELECT"}' -i
  models      curl -s ${url}/v1/models
  stream      curl -sN ${url}/v1/chat/completions -H 'x-session-id: demo-1' \\
                -d '{"model":"sim-model","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}'
  replicas    curl -s ${url}/replicas -H 'authorization: Bearer ${token}'
  scale up    curl -s -X POST ${url}/replicas -H 'authorization: Bearer ${token}' -d '{"model":"sim-coder"}' -H 'content-type: application/json'
  scale down  curl -s -X DELETE ${url}/replicas/coder-d1 -H 'authorization: Bearer ${token}'
  API docs    ${url}/docs

Ctrl-C drains the router and stops every replica it launched.

`);
await import('./main.js');

/** Once the router answers, one replica of each model, launched by model through the admin API. */
async function launchOnePerModel(): Promise<void> {
  const deadline = performance.now() + 30_000;
  while (
    !(await fetch(`${url}/livez`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (performance.now() > deadline) return;
    await new Promise((done) => setTimeout(done, 100));
  }
  for (const model of MODELS) {
    const r = await fetch(`${url}/replicas`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model }),
    });
    if (r.status !== 202) process.stderr.write(`demo: launching a replica of ${model} failed: ${r.status} ${await r.text()}\n`);
  }
}
await launchOnePerModel().catch((e: unknown) => process.stderr.write(`demo: ${e instanceof Error ? e.message : String(e)}\n`));
