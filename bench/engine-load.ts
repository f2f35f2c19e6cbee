/**
 * Engine-reported load (issue 29 item 3), a standalone bench: three simulators that run 4 requests
 * at once and queue the rest (`--max-running 4`); a batch job sends 16 concurrent streams straight
 * to the first one, bypassing the router (4 running, ~12 waiting there). Router clients open new
 * conversations (a fresh session each) at a fixed concurrency, once through a router that counts
 * only its own requests and once through one reading the engines' metrics (`engine: vllm`).
 * Client time to first token and where the router's requests went.
 *
 *   npm run build:test && node dist-test/bench/engine-load.js [seconds]
 */
import http from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { simRequest, type SimProcess } from '../test/support/sim-process.js';
import { parseProm, sum } from '../test/support/prom.js';
import { startRouter, startSims, stopSims } from './processes.js';
import type { BenchContext } from './scenario.js';
import { fmt, summarize } from './stats.js';
import { openStream } from './stream-client.js';

const SECONDS = Number(process.argv[2] ?? 20);
const SIM_ARGS = ['--max-running', '4', '--ttft-base-ms', '20', '--itl-ms', '10', '--output-tokens', '16'];
const EXTERNAL = 16;
const CLIENTS = 6;
const body = (session: string): string =>
  JSON.stringify({ model: 'sim-model', session_id: session, messages: [{ role: 'user', content: `hello ${session}` }], stream: true, max_tokens: 16 });

/** Streams to `url` from `loops` loops until `stop()`; returns each stream's time to first event. */
function drive(url: string, loops: number, label: string): { stop(): Promise<number[]> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: loops });
  const ttft: number[] = [];
  let running = true;
  let seq = 0;
  const all = Array.from({ length: loops }, async () => {
    while (running) {
      const t = await openStream(agent, new URL('/v1/chat/completions', url), body(`${label}-${seq++}`)).finished;
      if (t.status === 200 && t.eventsAt.length > 0) ttft.push(t.eventsAt[0] - t.startAt);
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(all);
      agent.destroy();
      return ttft;
    },
  };
}

async function row(ctx: BenchContext, name: string, engine: boolean): Promise<string> {
  const sims: SimProcess[] = await startSims(3, SIM_ARGS, 'eng');
  const replicas = sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port, ...(engine ? { engine: 'vllm' } : {}) }));
  const router = await startRouter(ctx, sims, ['--health-interval', '0.5', '--engine-metrics-interval', '0.5'], [], { replicas });
  try {
    const batch = drive(sims[0].url, EXTERNAL, 'batch');
    await new Promise((r) => setTimeout(r, 2_000)); // the batch job's queue builds up (and a scrape sees it)
    const clients = drive(router.url, CLIENTS, 'client');
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const ttft = summarize(await clients.stop());
    await batch.stop();
    const { samples } = parseProm((await simRequest(`${router.url}/metrics`)).body.toString());
    const routed = sims.map((s) => sum(samples, 'affinity_router_requests_total', { replica: s.name }));
    return `| ${name} | ${ttft.count} | ${fmt(ttft.mean, 1)} | ${fmt(ttft.p50, 1)} | ${fmt(ttft.p99, 1)} | ${routed.join(' / ')} |`;
  } finally {
    await router.stop();
    await stopSims(sims);
  }
}

async function main(): Promise<void> {
  const ctx = { tmpDir: mkdtempSync(join(tmpdir(), 'ar-engine-')), log: (m: string) => process.stderr.write(`${m}\n`) } as unknown as BenchContext;
  const lines = [
    `${EXTERNAL} streams of a batch job straight to eng0 (4 run, the rest wait); ${CLIENTS} router clients, new conversation per request, ${SECONDS} s per row`,
    '',
    '| router | client streams | TTFT mean ms | TTFT p50 ms | TTFT p99 ms | requests the router sent to eng0 / eng1 / eng2 |',
    '|---|---|---|---|---|---|',
  ];
  lines.push(await row(ctx, "own in-flight counts only (today's default)", false));
  lines.push(await row(ctx, 'engine: vllm (engine-reported load)', true));
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
