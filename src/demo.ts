/**
 * `npm start`: the bundled demo. Runs the router with config/demo.json (a local host with three
 * device slots whose command is the replica simulator), launches two replicas, and prints how to
 * talk to it. Ctrl-C drains and stops everything it launched.
 */
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);
const token = process.env['ROUTER_ADMIN_TOKEN'] ?? randomBytes(12).toString('hex');
process.env['ROUTER_ADMIN_TOKEN'] = token;
const extra = process.argv.slice(2);
const portIdx = extra.indexOf('--port');
const port = portIdx >= 0 ? extra[portIdx + 1] : '8000';
process.argv = [process.argv[0]!, join(root, 'dist/main.js'), '--config', 'config/demo.json', '--host', '127.0.0.1', '--port', port ?? '8000', '--initial-replicas', '2', '--log-format', 'pretty', ...extra.filter((_, i) => i !== portIdx && i !== portIdx + 1)];

const url = `http://127.0.0.1:${port}`;
process.stdout.write(`
affinity-router demo: 2 simulated replicas launched into 3 device slots (config/demo.json)

  router      ${url}            admin token: ${token}
  chat        curl -s ${url}/v1/chat/completions -H 'content-type: application/json' \\
                -d '{"model":"sim-model","session_id":"demo-1","messages":[{"role":"user","content":"hello"}]}' -i
  stream      curl -sN ${url}/v1/chat/completions -H 'x-session-id: demo-1' \\
                -d '{"model":"sim-model","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}'
  replicas    curl -s ${url}/replicas -H 'authorization: Bearer ${token}'
  scale up    curl -s -X POST ${url}/replicas -H 'authorization: Bearer ${token}'
  scale down  curl -s -X DELETE ${url}/replicas/demo-d2 -H 'authorization: Bearer ${token}'
  API docs    ${url}/docs

Ctrl-C drains the router and stops every replica it launched.

`);
await import('./main.js');
