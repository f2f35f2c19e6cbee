/**
 * Time to a stream's first byte through two builds of the router (and optionally a third row:
 * this build with one process), beside direct, in one sitting: sequential streams on one
 * keep-alive connection per target, the targets taking turns stream by stream so each sees the
 * same machine. Each stream is a new session (a first turn, placed by its prompt) unless
 * `--pinned`, which keeps one session per target (every stream after the first retains its pin).
 * `--pipe` adds the plain Node pipe proxy (bench/node-proxy.ts) as a row.
 *
 *   node dist-test/bench/ab-first-byte.js --old ../old/dist-test/src/main.js [--workers 2] [--streams 60] [--pinned] [--one-process] [--pipe]
 *
 * Prints the p50 and p90 time to first byte per target and what each adds over direct, as a
 * Markdown table on stdout.
 */
import http from 'node:http';
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { MAIN_ENTRY } from './bench-options.js';
import { startRouter, startSims, stopSims } from './processes.js';
import { startNodeProxy } from './reference-proxies.js';
import { summarize } from './stats.js';
import { openStream } from './stream-client.js';
import { scriptContext } from './tools.js';
import { CHAT_PATH, streamBody } from './workload.js';

const WARMUP_STREAMS = 2;
const TOKENS = 5;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      old: { type: 'string' },
      workers: { type: 'string' },
      streams: { type: 'string' },
      pinned: { type: 'boolean' },
      'one-process': { type: 'boolean' },
      pipe: { type: 'boolean' },
    },
  });
  if (values.old === undefined) throw new Error("--old <path of the other build's dist-test/src/main.js> is required");
  const streams = Number(values.streams ?? '60');
  if (!Number.isInteger(streams) || streams < 1) throw new Error(`--streams must be a whole number of at least 1, got ${values.streams}`);
  const workers = Number(values.workers ?? '2');
  if (!Number.isInteger(workers) || workers < 1) throw new Error(`--workers must be a whole number of at least 1, got ${values.workers}`);
  const ctx = scriptContext('ab', false);
  const sims = await startSims(2, ['--itl-ms', '50']);
  const flags = workers > 1 ? ['--workers', String(workers)] : [];
  const routers: Array<{ name: string; router: { url: string; stop(): Promise<void> } }> = [
    { name: `old, ${workers} worker(s)`, router: await startRouter(ctx, sims, flags, [], {}, resolve(values.old)) },
    { name: `new, ${workers} worker(s)`, router: await startRouter(ctx, sims, flags, [], {}, MAIN_ENTRY) },
  ];
  if (values['one-process'] === true) routers.push({ name: 'new, one process', router: await startRouter(ctx, sims, [], [], {}, MAIN_ENTRY) });
  if (values.pipe === true) routers.push({ name: 'node pipe', router: await startNodeProxy(sims.map((s) => s.port)) });
  const targets = [{ name: 'direct', url: `http://127.0.0.1:${sims[0].port}` }, ...routers.map((r) => ({ name: r.name, url: r.router.url }))];
  const agents = targets.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
  const ttfb: number[][] = targets.map(() => []);
  let failed = 0;
  try {
    ctx.log(`${streams} sequential ${values.pinned === true ? 'pinned' : 'first-turn'} streams of ${TOKENS} chunks per target, taking turns`);
    for (let i = 0; i < WARMUP_STREAMS + streams; i++) {
      for (const [k, target] of targets.entries()) {
        const session = values.pinned === true ? `pinned-${k}` : `first-${i}-${k}`;
        const t = await openStream(agents[k], new URL(CHAT_PATH, target.url), streamBody(TOKENS, session)).finished;
        if (t.status !== 200 || !t.sawDone) failed++;
        else if (i >= WARMUP_STREAMS) ttfb[k].push(t.firstByteAt - t.startAt);
      }
    }
  } finally {
    for (const a of agents) a.destroy();
    for (const r of routers) await r.router.stop();
    await stopSims(sims);
    rmSync(ctx.tmpDir, { recursive: true, force: true });
  }
  const direct = summarize(ttfb[0]);
  const lines = ['| target | streams | TTFB p50 ms | TTFB p90 ms | added p50 ms |', '| --- | --- | --- | --- | --- |'];
  for (const [k, target] of targets.entries()) {
    const s = summarize(ttfb[k]);
    const added = k === 0 ? '' : `+${(s.p50 - direct.p50).toFixed(3)}`;
    lines.push(`| ${target.name} | ${s.count} | ${s.p50.toFixed(3)} | ${s.p90.toFixed(3)} | ${added} |`);
  }
  process.stdout.write(`${lines.join('\n')}\n\nfailed streams: ${failed}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
