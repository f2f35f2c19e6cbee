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
 * `--workers N` runs both routers with `--workers N`: CPU per request is then the primary's and
 * its workers' together, and the primary's alone is a column of its own (it routes every request,
 * so it is what caps a many-core deployment). `--sdk-headers` sends the headers the OpenAI Python
 * SDK sends with each request (user agent, `Authorization`, ten `X-Stainless-*`) beside the body.
 *
 * Prints one line per pair and the medians, as a Markdown table on stdout.
 */
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { MAIN_ENTRY } from './bench-options.js';
import { runClosedLoop } from './load.js';
import { cpuSeconds, processTree, startRouter, startSims, stopSims } from './processes.js';
import { scriptContext } from './tools.js';
import { chatBodies } from './workload.js';

const CHAT_PATH = '/v1/chat/completions';
/** What the OpenAI Python SDK sends with each request besides the body and its type. */
const SDK_HEADERS: Readonly<Record<string, string>> = {
  'User-Agent': 'OpenAI/Python 1.99.9',
  Authorization: 'Bearer sk-bench-0123456789abcdef0123456789abcdef',
  Accept: 'application/json',
  'Accept-Encoding': 'gzip, deflate',
  'X-Stainless-Lang': 'python',
  'X-Stainless-Package-Version': '1.99.9',
  'X-Stainless-OS': 'Linux',
  'X-Stainless-Arch': 'x64',
  'X-Stainless-Runtime': 'CPython',
  'X-Stainless-Runtime-Version': '3.11.7',
  'X-Stainless-Async': 'false',
  'X-Stainless-Retry-Count': '0',
  'X-Stainless-Read-Timeout': '600',
};

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2;
}

interface Sample {
  readonly rps: number;
  /** The router's processes together. */
  readonly cpuUsPerReq: number;
  /** The primary process alone (the same as cpuUsPerReq without workers). */
  readonly primaryUsPerReq: number;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      old: { type: 'string' },
      pairs: { type: 'string' },
      seconds: { type: 'string' },
      resident: { type: 'boolean' },
      pin: { type: 'boolean' },
      workers: { type: 'string' },
      'sdk-headers': { type: 'boolean' },
    },
  });
  if (values.old === undefined) throw new Error("--old <path of the other build's dist-test/src/main.js> is required");
  const oldEntry = resolve(values.old);
  const pairs = Number(values.pairs ?? '6');
  const seconds = Number(values.seconds ?? '6');
  if (!Number.isInteger(pairs) || pairs < 1) throw new Error(`--pairs must be a whole number of at least 1, got ${values.pairs}`);
  if (!(seconds > 0)) throw new Error(`--seconds must be positive, got ${values.seconds}`);
  const workers = Number(values.workers ?? '1');
  if (!Number.isInteger(workers) || workers < 1) throw new Error(`--workers must be a whole number of at least 1, got ${values.workers}`);
  const flags = workers > 1 ? ['--workers', String(workers)] : [];
  const headers = values['sdk-headers'] === true ? SDK_HEADERS : {};
  const ctx = scriptContext('ab', true);
  const cpus = availableParallelism();
  if (values.pin === true && cpus < 2) throw new Error(`--pin needs 2 or more CPUs, this process may use ${cpus}`);
  // Children inherit this process's CPUs (simulators, wrk, routers); each router is then moved.
  const pin = (pid: number, list: string): void => void execFileSync('taskset', ['-a', '-p', '-c', list, String(pid)], { stdio: 'ignore' });
  if (values.pin === true) pin(process.pid, `0-${cpus - 2}`);
  const bodies = chatBodies(500, 1024);
  const sims = await startSims(2, ['--ttft-base-ms', '0', '--itl-ms', '0', '--prefill-ms-per-token', '0']);
  const builds = { old: oldEntry, new: MAIN_ENTRY };
  const started = async (entry: string): Promise<Awaited<ReturnType<typeof startRouter>>> => {
    const router = await startRouter(ctx, sims, flags, [], {}, entry);
    if (values.pin === true) for (const pid of processTree(router.pid)) pin(pid, String(cpus - 1));
    return router;
  };
  const got: Record<'old' | 'new', Sample[]> = { old: [], new: [] };
  const measure = async (i: number, which: 'old' | 'new', router: { url: string; pid: number }): Promise<void> => {
    const pids = processTree(router.pid);
    const cpu0 = pids.map(cpuSeconds);
    const r = await runClosedLoop(ctx, { url: router.url, path: CHAT_PATH, connections: 32, durationS: seconds, bodies, headers });
    const used = pids.map((pid, k) => cpuSeconds(pid) - (cpu0[k] ?? 0));
    const perReq = (s: number): number => (s * 1e6) / Math.max(1, r.requests);
    const cpuUsPerReq = perReq(used.reduce((a, b) => a + b, 0));
    const primaryUsPerReq = perReq(used[0] ?? 0);
    got[which].push({ rps: r.rps, cpuUsPerReq, primaryUsPerReq });
    ctx.log(`pair ${i + 1} ${which}: ${Math.round(r.rps)} req/s, ${Math.round(cpuUsPerReq)} CPU µs/req (primary ${Math.round(primaryUsPerReq)})`);
  };
  const warm = (router: { url: string }) => runClosedLoop(ctx, { url: router.url, path: CHAT_PATH, connections: 32, durationS: 2, bodies, headers });
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
    rmSync(ctx.tmpDir, { recursive: true, force: true });
  }
  // Without workers the primary is the router: its column would repeat the CPU column.
  const primary = workers > 1;
  const out: string[] = [
    `| pair | old req/s | new req/s | old CPU µs/req | new CPU µs/req | new ÷ old req/s | new ÷ old CPU |${primary ? ' old primary µs/req | new primary µs/req | new ÷ old primary |' : ''}`,
    `|---|---|---|---|---|---|---|${primary ? '---|---|---|' : ''}`,
  ];
  const ratios: Record<'rps' | 'cpu' | 'primary', number[]> = { rps: [], cpu: [], primary: [] };
  for (let i = 0; i < pairs; i++) {
    const o = got.old[i];
    const n = got.new[i];
    if (o === undefined || n === undefined) continue;
    ratios.rps.push(n.rps / o.rps);
    ratios.cpu.push(n.cpuUsPerReq / o.cpuUsPerReq);
    ratios.primary.push(n.primaryUsPerReq / o.primaryUsPerReq);
    const tail = primary
      ? ` ${Math.round(o.primaryUsPerReq)} | ${Math.round(n.primaryUsPerReq)} | ${(n.primaryUsPerReq / o.primaryUsPerReq).toFixed(3)} |`
      : '';
    out.push(
      `| ${i + 1} | ${Math.round(o.rps)} | ${Math.round(n.rps)} | ${Math.round(o.cpuUsPerReq)} | ${Math.round(n.cpuUsPerReq)} | ${(n.rps / o.rps).toFixed(3)} | ${(n.cpuUsPerReq / o.cpuUsPerReq).toFixed(3)} |${tail}`,
    );
  }
  const med = (w: 'old' | 'new', k: keyof Sample): number => Math.round(median(got[w].map((s) => s[k])));
  const tail = primary ? ` ${med('old', 'primaryUsPerReq')} | ${med('new', 'primaryUsPerReq')} | ${median(ratios.primary).toFixed(3)} |` : '';
  out.push(
    `| median | ${med('old', 'rps')} | ${med('new', 'rps')} | ${med('old', 'cpuUsPerReq')} | ${med('new', 'cpuUsPerReq')} | ${median(ratios.rps).toFixed(3)} | ${median(ratios.cpu).toFixed(3)} |${tail}`,
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
