/**
 * Router memory while clients call `GET /v1/models` and one replica's list is ~57 MB (issue 26
 * item 5). A stand-in replica (this process) answers `/health` and a 57 MB `/v1/models`; the
 * router under test (the compiled entry given, so an older build can be measured the same way)
 * routes to it; 8 clients call `/v1/models` 3 times each. Peak router RSS (sampled from /proc every
 * 20 ms), wall time per call and bytes per answer.
 *
 *   node dist-test/bench/models-rss.js <path to dist/main.js> [label]
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { modelsAnswer } from '../src/sim/sim-openai.js';

const entry = process.argv[2] ?? 'dist/main.js';
const label = process.argv[3] ?? entry;
const huge = Buffer.from(modelsAnswer('huge', 'sim-model', 0, []));

const rssMiB = (pid: number): number => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? NaN : Number(m[1]) / 1024;
};
const get = (url: string): Promise<{ status: number; bytes: number; ms: number }> =>
  new Promise((resolve) => {
    const t0 = performance.now();
    http
      .get(url, { agent: false }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, ms: performance.now() - t0 }));
      })
      .on('error', () => resolve({ status: 0, bytes: 0, ms: performance.now() - t0 }));
  });

async function main(): Promise<void> {
  const replica = http.createServer((req, res) => {
    if (req.url === '/health') return void res.end('{"status":"ok"}');
    if (req.url?.startsWith('/v1/models') === true) return void res.writeHead(200, { 'content-type': 'application/json' }).end(huge);
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => replica.listen(0, '127.0.0.1', r));
  const port = (replica.address() as AddressInfo).port;
  const dir = mkdtempSync(join(tmpdir(), 'ar-models-rss-'));
  const cfg = join(dir, 'config.json');
  writeFileSync(cfg, JSON.stringify({ replicas: [{ name: 'r0', host: '127.0.0.1', port }] }));
  const child = spawn(process.execPath, [entry, '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--log-level', 'info', '--health-interval', '0.5'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve) => {
    let buf = '';
    child.stdout.on('data', (c: Buffer) => {
      buf += c.toString();
      const m = /"event":"listening"[^\n]*"url":"([^"]+)"/.exec(buf) ?? /"url":"([^"]+)"[^\n]*"event":"listening"/.exec(buf);
      if (m !== null) resolve(m[1]);
    });
  });
  child.stdout.resume();
  await new Promise((r) => setTimeout(r, 3_000)); // healthy, discovery tried
  const idle = rssMiB(child.pid!);
  let peak = idle;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(child.pid!))), 20);
  const calls: Array<{ status: number; bytes: number; ms: number }> = [];
  for (let round = 0; round < 3; round++) calls.push(...(await Promise.all(Array.from({ length: 8 }, () => get(`${url}/v1/models`)))));
  clearInterval(sampler);
  child.kill('SIGKILL');
  replica.close();
  const ms = calls.map((c) => c.ms).sort((a, b) => a - b);
  const statuses = [...new Set(calls.map((c) => c.status))].join('/');
  process.stdout.write(
    `| ${label} | ${idle.toFixed(0)} | ${peak.toFixed(0)} | ${ms[Math.floor(ms.length / 2)].toFixed(0)} | ${ms[ms.length - 1].toFixed(0)} | ${statuses} | ${Math.max(...calls.map((c) => c.bytes))} |\n`,
  );
  process.exit(0);
}

main().catch((e: unknown) => {
  process.stderr.write(`${String(e)}\n`);
  process.exit(1);
});
