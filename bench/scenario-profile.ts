/**
 * Scenario (p): where the router's time goes. Runs the throughput load of (a) against the plain
 * Node pipe proxy and against the router, each under `node --cpu-prof`. Each profile (load phase
 * only) is attributed to owners (fastify, @nestjs/*, http-proxy, node:http, router modules, GC...)
 * and put side by side in CPU microseconds per request, so the router's extra cost per request
 * shows where it is spent.
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { SimProcess } from '../test/support/sim-process.js';
import { summarizeProfile, type ProfileSummary } from './cpu-profile.js';
import { runClosedLoop, type LoadResult } from './load.js';
import { startRouter, startSims, stopSims } from './processes.js';
import { startNodeProxy } from './reference-proxies.js';
import type { BenchContext, Scenario, ScenarioResult } from './scenario.js';
import { THROUGHPUT_CONNECTIONS } from './scenario-throughput.js';
import { fmt } from './stats.js';
import { CHAT_PATH, chatBodies } from './workload.js';

/** A profiled process: its load result and profile summary. */
interface Profiled {
  name: string;
  load: LoadResult;
  profile: ProfileSummary;
}

type Starter = (nodeArgs: string[]) => Promise<{ url: string; stop(): Promise<void> }>;

async function profiled(ctx: BenchContext, name: string, start: Starter, bodies: string[]): Promise<Profiled> {
  const dir = join(ctx.tmpDir, `cpu-prof-${name.replace(/\W+/g, '-')}`);
  mkdirSync(dir, { recursive: true });
  const { plan } = ctx.options;
  const spawnedAt = performance.now();
  const proc = await start(['--cpu-prof', '--cpu-prof-dir', dir]);
  let load: LoadResult;
  let window: { fromMs: number; toMs: number };
  try {
    ctx.log(`p: ${name} under --cpu-prof, ${plan.profileS}s at ${THROUGHPUT_CONNECTIONS} connections`);
    await runClosedLoop(ctx, { url: proc.url, path: CHAT_PATH, connections: THROUGHPUT_CONNECTIONS, durationS: plan.warmupS, bodies });
    const from = performance.now() - spawnedAt;
    load = await runClosedLoop(ctx, { url: proc.url, path: CHAT_PATH, connections: THROUGHPUT_CONNECTIONS, durationS: plan.profileS, bodies });
    window = { fromMs: from, toMs: performance.now() - spawnedAt };
  } finally {
    await proc.stop();
  }
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error(`${name} wrote no .cpuprofile into ${dir} (did it exit cleanly on SIGTERM?)`);
  return { name, load, profile: summarizeProfile(join(dir, file), 15, window) };
}

/** CPU µs per request spent in `owner` (self time) by `p`. */
function usPerRequest(p: Profiled, owner: string): number {
  const e = p.profile.byOwner.find((o) => o.name === owner);
  return e === undefined || p.load.requests === 0 ? 0 : (e.selfMs * 1000) / p.load.requests;
}

function busyUsPerRequest(p: Profiled): number {
  const busy = p.profile.byOwner.reduce((a, o) => a + o.selfMs, 0);
  return p.load.requests === 0 ? NaN : (busy * 1000) / p.load.requests;
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const bodies = chatBodies(500, 1024);
  const sims: SimProcess[] = await startSims(ctx.options.sims, [], 'p');
  let plain: Profiled;
  let router: Profiled;
  try {
    plain = await profiled(
      ctx,
      'node pipe',
      (args) =>
        startNodeProxy(
          sims.map((s) => s.port),
          args,
        ),
      bodies,
    );
    router = await profiled(ctx, 'router', (args) => startRouter(ctx, sims, [], args), bodies);
  } finally {
    await stopSims(sims);
  }
  const pct = (x: number | undefined): string => (x === undefined ? '' : `${(x * 100).toFixed(1)}%`);
  const owners = router.profile.byOwner.slice(0, 16);
  return {
    id: 'p-profile',
    title: 'Where the time goes (CPU profiles)',
    tables: [
      {
        title: `(p) Throughput under the profiler, ${THROUGHPUT_CONNECTIONS} connections`,
        columns: ['target', 'req/s', 'p50 ms', 'p99 ms', 'errors', 'non-2xx', 'busy', 'CPU µs/request'],
        rows: [plain, router].map((p) => [
          p.name,
          fmt(p.load.rps, 0),
          fmt(p.load.p50Ms, 3),
          fmt(p.load.p99Ms, 3),
          String(p.load.errors),
          String(p.load.non2xx),
          pct(p.profile.busyShare),
          fmt(busyUsPerRequest(p), 0),
        ]),
      },
      {
        title: `(p) Router CPU by owner (load phase ${fmt(router.profile.durationMs / 1000, 1)} s), next to the plain Node proxy`,
        columns: ['owner', 'router self share', 'router on stack', 'router µs/req', 'node pipe µs/req'],
        rows: owners.map((e) => [e.name, pct(e.share), pct(e.inclusiveShare), fmt(usPerRequest(router, e.name), 0), fmt(usPerRequest(plain, e.name), 0)]),
      },
      {
        title: '(p) Router top functions by self time',
        columns: ['function', 'self ms', 'share of busy'],
        rows: router.profile.topFunctions.map((e) => [e.name, String(e.selfMs), pct(e.share)]),
      },
    ],
    targets: [],
    charts: [
      {
        file: 'p-owners',
        title: '(p) CPU µs per request by owner: router vs plain Node proxy',
        unit: 'µs / request',
        categories: owners.slice(0, 8).map((e) => e.name.replace(/^node: /, '')),
        series: [
          { name: 'router', values: owners.slice(0, 8).map((e) => usPerRequest(router, e.name)) },
          { name: 'node pipe', values: owners.slice(0, 8).map((e) => usPerRequest(plain, e.name)) },
        ],
      },
    ],
    notes: [
      'Both processes run with `node --cpu-prof` under the (a) load; only samples between the start and end of the measured load phase count (start-up and shutdown excluded). "Owner" = the node_modules package, the Node core area, or the router module (dist-test/src/modules/<name>) of the sampled frame. "self" counts a sample for the frame on top of the stack only; "on stack" counts it for every owner anywhere on the stack (so it adds up to more than 100%). µs/req = self time in the load phase ÷ requests completed in it. The profiler slows both processes somewhat. V8 samples on a wall-clock timer, so "(native) writev" also holds time the thread sat descheduled inside the syscall (on loopback the peer\'s TCP receive work runs in the sender\'s writev): compare syscall counts, not this line, before blaming writes.',
    ],
    data: { plain, router },
  };
}

/** Scenario (p). */
export const profileScenario: Scenario = { key: 'p', id: 'p-profile', title: 'Where the time goes', run };
