/**
 * The soak (issue 7, scenarios 11 and 12): `npm run soak [-- --minutes N | --quick]`.
 *
 * 1. Steady mixed load (streams and short requests, a new session id on every request) for N
 *    minutes (default 10; `--quick`: 50 s) against three simulators through the router process,
 *    sampling the router's RSS and open fds (/proc) and its /metrics every 10 s. After the
 *    warm-up (first 20 %): RSS and fds flat within 10 % (median of the last third of the samples
 *    vs the first third; RSS only judged with a steady phase of 5 min or more), the session
 *    directory at its cap (`--max-sessions`, default 5000; 1000 with `--quick`) and LRU
 *    evictions growing, and the prefix index at its cap (`--prefix-blocks`, default 20,000;
 *    5,000 with `--quick`): each new session's first turn records its prompt's blocks (issue 15
 *    item 2), so with the router's default of 1,000,000 blocks the index would still be filling,
 *    by design, when the RSS is judged.
 * 2. 2,000 concurrent connections for 60 s (`--quick`: 10 s): zero router errors.
 * 3. Every request accounted: received = Σ termination causes = what the clients sent, in-flight 0.
 *
 * Prints the samples and a criteria table; exits 1 when a criterion failed, 2 on bad arguments.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sum } from '../support/prom.js';
import { spawnSim, stopAllSims } from '../support/sim-process.js';
import { accounting, openFileLimit, procSample, runLoad, scrapeMetrics, startQuietRouter, type LoadResult, type QuietRouter } from './load.js';

interface Options {
  steadyMs: number;
  burstMs: number;
  connections: number;
  burstConnections: number;
  maxSessions: number;
  prefixBlocks: number;
}

interface Sample {
  atS: number;
  rssMb: number;
  fds: number;
  sessions: number;
  evictedLru: number;
  prefixBlocks: number;
  received: number;
}

interface Criterion {
  name: string;
  ok: boolean;
  detail: string;
  /** Not judged in this run (shown, never a failure). */
  skipped?: boolean;
}

/** RSS keeps growing while V8 sizes its heap for the load: a shorter steady phase cannot tell that from a leak. */
const MIN_STEADY_FOR_RSS_MS = 5 * 60_000;

const SAMPLE_MS = 10_000;

function parseArgs(argv: string[]): Options {
  const opts: Options = { steadyMs: 10 * 60_000, burstMs: 60_000, connections: 100, burstConnections: 2_000, maxSessions: 5_000, prefixBlocks: 20_000 };
  let quick = false;
  let maxSessionsGiven = false;
  let prefixBlocksGiven = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const num = (): number => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v <= 0) usage(`${a} needs a positive number, got ${JSON.stringify(argv[i])}`);
      return v;
    };
    if (a === '--quick') quick = true;
    else if (a === '--minutes') opts.steadyMs = num() * 60_000;
    else if (a === '--burst-seconds') opts.burstMs = num() * 1_000;
    else if (a === '--connections') opts.connections = Math.round(num());
    else if (a === '--max-sessions') {
      opts.maxSessions = Math.round(num());
      maxSessionsGiven = true;
    } else if (a === '--prefix-blocks') {
      opts.prefixBlocks = Math.round(num());
      prefixBlocksGiven = true;
    } else if (a === '--help' || a === '-h') usage();
    else usage(`unknown argument ${JSON.stringify(a)}`);
  }
  if (quick) {
    opts.steadyMs = 50_000;
    opts.burstMs = 10_000;
    if (!maxSessionsGiven) opts.maxSessions = 1_000;
    if (!prefixBlocksGiven) opts.prefixBlocks = 5_000;
  }
  return opts;
}

function usage(problem?: string): never {
  const text =
    'usage: node dist-test/test/reliability/soak.js [--minutes N] [--quick] [--burst-seconds S] [--connections N] [--max-sessions N] [--prefix-blocks N]\n';
  if (problem !== undefined) {
    process.stderr.write(`error: ${problem}\n${text}`);
    process.exit(2);
  }
  process.stdout.write(text);
  process.exit(0);
}

async function sample(router: QuietRouter, t0: number): Promise<Sample> {
  const p = procSample(router.pid);
  const m = await scrapeMetrics(router.url);
  return {
    atS: Math.round((performance.now() - t0) / 1000),
    rssMb: Math.round((p.rssBytes / 1024 / 1024) * 10) / 10,
    fds: p.fds,
    sessions: sum(m, 'affinity_router_sessions'),
    evictedLru: sum(m, 'affinity_router_session_evictions_total', { cause: 'lru' }),
    prefixBlocks: sum(m, 'affinity_router_prefix_index_blocks'),
    received: sum(m, 'affinity_router_requests_received_total'),
  };
}

/**
 * Drift of a series: how far the median of its last third is from the median of its first third
 * (0.1 = 10 %). GC makes single RSS samples jump by tens of MB, and a passing load dip shrinks
 * the heap for a while; a leak shows as a level that keeps rising.
 */
const drift = (xs: number[]): number => {
  const third = Math.max(1, Math.floor(xs.length / 3));
  const median = (ys: number[]): number => [...ys].sort((a, b) => a - b)[Math.floor(ys.length / 2)];
  const first = median(xs.slice(0, third));
  return Math.abs(median(xs.slice(-third)) - first) / first;
};
const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;
const clean = (r: LoadResult): boolean => r.serverErrors === 0 && r.resets === 0 && r.incomplete === 0 && r.timeouts === 0 && r.ok === r.sent;
const summarize = (r: LoadResult): string =>
  `${r.sent} sent, ${r.ok} ok (${r.streams} streams), 5xx ${r.serverErrors}, resets ${r.resets}, incomplete ${r.incomplete}, timeouts ${r.timeouts}, p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms${r.failures.length > 0 ? `; ${r.failures.slice(0, 3).join('; ')}` : ''}`;

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  const limit = openFileLimit();
  if (limit < 4_096) {
    process.stderr.write(`error: the open-files limit is ${limit}; the 2,000-connection phase needs at least 4096 (raise it with ulimit -n)\n`);
    return 1;
  }
  console.log(
    `soak: steady ${opts.steadyMs / 1000} s with ${opts.connections} connections and unique session ids (--max-sessions ${opts.maxSessions}, --prefix-blocks ${opts.prefixBlocks}), then ${opts.burstConnections} connections for ${opts.burstMs / 1000} s`,
  );
  const sims = await Promise.all(['soak0', 'soak1', 'soak2'].map((name) => spawnSim({ name, args: ['--itl-ms', '5'] })));
  const cfg = join(tmpdir(), `soak-config-${process.pid}.json`);
  writeFileSync(cfg, JSON.stringify({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })) }));
  const router = await startQuietRouter(
    ['--config', cfg, '--health-interval', '1', '--max-sessions', String(opts.maxSessions), '--prefix-blocks', String(opts.prefixBlocks)],
    {
      keepLog: true,
    },
  );
  console.log(`router pid ${router.pid} at ${router.url}, log ${router.logFile}`);
  const criteria: Criterion[] = [];
  try {
    const t0 = performance.now();
    const samples: Sample[] = [await sample(router, t0)];
    const timer = setInterval(() => {
      sample(router, t0).then(
        (s) => {
          samples.push(s);
          console.log(
            `  t=${s.atS}s rss ${s.rssMb} MB, fds ${s.fds}, sessions ${s.sessions}, lru evictions ${s.evictedLru}, prefix blocks ${s.prefixBlocks}, received ${s.received}`,
          );
        },
        // A missed sample leaves a gap in the series; the criteria judge the samples taken.
        (e: unknown) => console.log(`  sample failed: ${e instanceof Error ? e.message : 'unknown error'}`),
      );
    }, SAMPLE_MS);
    const steady = await runLoad({ url: router.url, connections: opts.connections, durationMs: opts.steadyMs, sessions: 'unique', streamShare: 0.3 });
    clearInterval(timer);
    samples.sort((a, b) => a.atS - b.atS);
    // samples taken under load, after the warm-up (the first 20 % of the steady phase)
    const warm = samples.filter((s) => s.atS >= (0.2 * opts.steadyMs) / 1000);
    samples.push(await sample(router, t0)); // after the load: shown, not judged
    criteria.push({ name: 'steady: zero errors', ok: clean(steady), detail: summarize(steady) });
    criteria.push({ name: 'steady: at least 3 samples after warm-up', ok: warm.length >= 3, detail: `${warm.length} samples` });
    const band = (xs: number[], unit: string): string => `${pct(drift(xs))} drift (samples ${Math.min(...xs)}..${Math.max(...xs)}${unit})`;
    const judgeRss = opts.steadyMs >= MIN_STEADY_FOR_RSS_MS;
    criteria.push({
      name: 'RSS flat within 10 % after warm-up',
      ok: drift(warm.map((s) => s.rssMb)) <= 0.1,
      detail:
        band(
          warm.map((s) => s.rssMb),
          ' MB',
        ) + (judgeRss ? '' : `; not judged: needs a steady phase of ${MIN_STEADY_FOR_RSS_MS / 60_000} min or more`),
      skipped: !judgeRss,
    });
    criteria.push({
      name: 'open fds flat within 10 % after warm-up',
      ok: drift(warm.map((s) => s.fds)) <= 0.1,
      detail: band(
        warm.map((s) => s.fds),
        '',
      ),
    });
    criteria.push({
      name: 'session directory at its cap after warm-up',
      ok: warm.every((s) => s.sessions === opts.maxSessions),
      detail: `sessions ${[...new Set(warm.map((s) => s.sessions))].join(',')} (cap ${opts.maxSessions})`,
    });
    criteria.push({
      name: 'prefix index at its cap after warm-up',
      ok: warm.every((s) => s.prefixBlocks === opts.prefixBlocks),
      detail: `blocks ${[...new Set(warm.map((s) => s.prefixBlocks))].join(',')} (cap ${opts.prefixBlocks})`,
    });
    criteria.push({
      name: 'LRU evictions growing',
      ok: warm.every((s, i) => i === 0 || s.evictedLru > warm[i - 1].evictedLru),
      detail: warm.map((s) => s.evictedLru).join(' → '),
    });

    console.log(`burst: ${opts.burstConnections} connections for ${opts.burstMs / 1000} s`);
    const burst = await runLoad({ url: router.url, connections: opts.burstConnections, durationMs: opts.burstMs, streamShare: 0.3 });
    criteria.push({ name: `${opts.burstConnections} connections: zero errors`, ok: clean(burst), detail: summarize(burst) });
    const acc = await accounting(router.url);
    const sent = steady.sent + burst.sent;
    criteria.push({
      name: 'every request accounted',
      ok: acc.received === sent && acc.terminated === sent,
      detail: `sent ${sent}, received ${acc.received}, Σ terminations ${acc.terminated} ${JSON.stringify(acc.byCause)}`,
    });
    criteria.push({ name: 'in-flight back to 0', ok: acc.inflight === 0, detail: `in-flight ${acc.inflight}` });
    const errors = router.problems().lines.filter((l) => /"level":(5|6)\d/.test(l));
    criteria.push({ name: 'no error logged by the router', ok: errors.length === 0, detail: errors.slice(0, 2).join(' ') || 'none' });

    console.log('\nsamples (router process):');
    console.table(samples);
  } finally {
    await router.stop();
    await stopAllSims();
    rmSync(cfg, { force: true });
  }
  console.log('\ncriteria:');
  console.table(criteria.map((c) => ({ result: c.skipped === true ? 'SKIP' : c.ok ? 'PASS' : 'FAIL', criterion: c.name, detail: c.detail })));
  const failed = criteria.filter((c) => !c.ok && c.skipped !== true);
  console.log(`router log kept at ${router.logFile}`);
  console.log(failed.length === 0 ? 'soak: PASS' : `soak: FAIL (${failed.map((c) => c.name).join('; ')})`);
  return failed.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`soak: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    const exit1 = (): never => process.exit(1);
    stopAllSims().then(exit1, exit1);
  },
);
