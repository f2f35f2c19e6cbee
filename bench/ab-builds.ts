/**
 * Two builds of the router side by side under the load of scenario (a): closed loop, 32
 * connections, the 500 one-kilobyte chat bodies with `session_id`, two simulators answering at
 * once. Each pair runs both routers one after the other (the order alternates), each with 2 s of
 * warm-up then the measured seconds; CPU per request is the router process's utime + stime over
 * the measured window (from /proc) divided by the requests, less sensitive to a shared machine's
 * scheduling than req/s.
 *
 *   node dist-test/bench/ab-builds.js --old ../old/dist-test/src/main.js [--pairs 6] [--seconds 6] [--resident]
 *
 * `--resident` starts each router once and alternates the load between the two running routers
 * (pairs of `--seconds` each, short ones are fine): on a machine whose speed drifts over tens of
 * seconds, two measurements a few seconds apart see the same machine, where a restart per
 * measurement spreads them over minutes.
 *
 * `--pin` (Linux, `taskset`, 2 or more CPUs) runs the router on the last CPU and everything else
 * (this script, the simulators, the load generator) on the others, so the router never shares a
 * core with the load it is measured under: on the 2-core bench machine two runs of one build then
 * agree within a few per cent pair by pair, where unpinned pairs of one build differed by up to 60%.
 *
 * Prints one line per pair and the medians, as a Markdown table on stdout.
 */
import { execFileSync } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseBenchArgs, MAIN_ENTRY } from './bench-options.js';
import { runClosedLoop } from './load.js';
import { startRouter, startSims, stopSims } from './processes.js';
import type { BenchContext } from './scenario.js';
import { chatBodies } from './workload.js';

const CHAT_PATH = '/v1/chat/completions';
const CLK_TCK = 100;

function onPath(name: string): string | null {
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // not here
    }
  }
  return null;
}

/** utime + stime of `pid`, in seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
}

interface Sample {
  readonly rps: number;
  readonly cpuUsPerReq: number;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { old: { type: 'string' }, pairs: { type: 'string' }, seconds: { type: 'string' }, resident: { type: 'boolean' }, pin: { type: 'boolean' } },
  });
  if (values.old === undefined) throw new Error("--old <path of the other build's dist-test/src/main.js> is required");
  const oldEntry = resolve(values.old);
  const pairs = Number(values.pairs ?? '6');
  const seconds = Number(values.seconds ?? '6');
  if (!Number.isInteger(pairs) || pairs < 1) throw new Error(`--pairs must be a whole number of at least 1, got ${values.pairs}`);
  if (!(seconds > 0)) throw new Error(`--seconds must be positive, got ${values.seconds}`);
  const tmpDir = mkdtempSync(join(tmpdir(), 'ar-ab-'));
  const ctx: BenchContext = {
    options: parseBenchArgs([]),
    tools: { wrk: onPath('wrk'), nginx: null, haproxy: null },
    tmpDir,
    log: (m) => process.stderr.write(`[ab ${new Date().toISOString().slice(11, 19)}] ${m}\n`),
  };
  const cpus = availableParallelism();
  if (values.pin === true && cpus < 2) throw new Error(`--pin needs 2 or more CPUs, this process may use ${cpus}`);
  // Children inherit this process's CPUs (simulators, wrk, routers); each router is then moved.
  const pin = (pid: number, list: string): void => void execFileSync('taskset', ['-a', '-p', '-c', list, String(pid)], { stdio: 'ignore' });
  if (values.pin === true) pin(process.pid, `0-${cpus - 2}`);
  const bodies = chatBodies(500, 1024);
  const sims = await startSims(2, ['--ttft-base-ms', '0', '--itl-ms', '0', '--prefill-ms-per-token', '0']);
  const builds = { old: oldEntry, new: MAIN_ENTRY };
  const started = async (entry: string): Promise<Awaited<ReturnType<typeof startRouter>>> => {
    const router = await startRouter(ctx, sims, [], [], {}, entry);
    if (values.pin === true) pin(router.pid, String(cpus - 1));
    return router;
  };
  const got: Record<'old' | 'new', Sample[]> = { old: [], new: [] };
  const measure = async (i: number, which: 'old' | 'new', router: { url: string; pid: number }): Promise<void> => {
    const cpu0 = cpuSeconds(router.pid);
    const r = await runClosedLoop(ctx, { url: router.url, path: CHAT_PATH, connections: 32, durationS: seconds, bodies });
    const cpuUsPerReq = ((cpuSeconds(router.pid) - cpu0) * 1e6) / Math.max(1, r.requests);
    got[which].push({ rps: r.rps, cpuUsPerReq });
    ctx.log(`pair ${i + 1} ${which}: ${Math.round(r.rps)} req/s, ${Math.round(cpuUsPerReq)} CPU µs/req`);
  };
  const warm = (router: { url: string }) => runClosedLoop(ctx, { url: router.url, path: CHAT_PATH, connections: 32, durationS: 2, bodies });
  const orderOf = (i: number): Array<'old' | 'new'> => (i % 2 === 0 ? ['old', 'new'] : ['new', 'old']);
  try {
    if (values.resident === true) {
      const routers = { old: await started(builds.old), new: await started(builds.new) };
      try {
        for (const which of orderOf(0)) await warm(routers[which]);
        for (let i = 0; i < pairs; i++) for (const which of orderOf(i)) await measure(i, which, routers[which]);
      } finally {
        await Promise.all([routers.old.stop(), routers.new.stop()]);
      }
    } else {
      for (let i = 0; i < pairs; i++) {
        for (const which of orderOf(i)) {
          const router = await started(builds[which]);
          try {
            await warm(router);
            await measure(i, which, router);
          } finally {
            await router.stop();
          }
        }
      }
    }
  } finally {
    await stopSims(sims);
    rmSync(tmpDir, { recursive: true, force: true });
  }
  const out: string[] = [
    '| pair | old req/s | new req/s | old CPU µs/req | new CPU µs/req | new ÷ old req/s | new ÷ old CPU |',
    '|---|---|---|---|---|---|---|',
  ];
  const rpsRatios: number[] = [];
  const cpuRatios: number[] = [];
  for (let i = 0; i < pairs; i++) {
    const o = got.old[i];
    const n = got.new[i];
    if (o === undefined || n === undefined) continue;
    rpsRatios.push(n.rps / o.rps);
    cpuRatios.push(n.cpuUsPerReq / o.cpuUsPerReq);
    out.push(
      `| ${i + 1} | ${Math.round(o.rps)} | ${Math.round(n.rps)} | ${Math.round(o.cpuUsPerReq)} | ${Math.round(n.cpuUsPerReq)} | ${(n.rps / o.rps).toFixed(3)} | ${(n.cpuUsPerReq / o.cpuUsPerReq).toFixed(3)} |`,
    );
  }
  const med = (w: 'old' | 'new', k: keyof Sample): number => Math.round(median(got[w].map((s) => s[k])));
  out.push(
    `| median | ${med('old', 'rps')} | ${med('new', 'rps')} | ${med('old', 'cpuUsPerReq')} | ${med('new', 'cpuUsPerReq')} | ${median(rpsRatios).toFixed(3)} | ${median(cpuRatios).toFixed(3)} |`,
  );
  process.stdout.write(out.join('\n') + '\n');
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`ab-builds failed: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  },
);
