/**
 * Where the machine's CPU goes under scenario (a)'s load (closed loop, 32 connections, the 500
 * one-kilobyte chat bodies with `session_id`, two simulators answering at once): for direct, one
 * router process and `--workers 2`, taking turns, the machine's busy share (/proc/stat) and the
 * cores used by the router's processes, by the simulators and by the rest (the load generator and
 * the kernel's share of the loopback traffic). On a machine the load generator and the replicas
 * share with the router, this bounds what any router design can reach: the throughput at which
 * the replicas and the generator alone would fill the machine.
 *
 *   node dist-test/bench/cpu-budget.js [--rounds 2] [--seconds 8]
 */
import { readFileSync, rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { runClosedLoop } from './load.js';
import { cpuSeconds, processTree, startRouter, startSims, stopSims } from './processes.js';
import { scriptContext } from './tools.js';
import { chatBodies } from './workload.js';

const CHAT_PATH = '/v1/chat/completions';

/** Idle and total jiffies of all CPUs together. */
function machine(): { idle: number; total: number } {
  const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  return { idle: (f[3] ?? 0) + (f[4] ?? 0), total: f.reduce((a, b) => a + b, 0) };
}

/** utime + stime of `pids` together, in seconds. */
const sumCpu = (pids: readonly number[]): number => pids.reduce((s, pid) => s + cpuSeconds(pid), 0);

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { rounds: { type: 'string' }, seconds: { type: 'string' } } });
  const rounds = Number(values.rounds ?? '2');
  const seconds = Number(values.seconds ?? '8');
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a whole number of at least 1, got ${values.rounds}`);
  if (!(seconds > 0)) throw new Error(`--seconds must be positive, got ${values.seconds}`);
  const ctx = scriptContext('budget', true);
  const cores = availableParallelism();
  const bodies = chatBodies(500, 1024);
  const sims = await startSims(2, ['--ttft-base-ms', '0', '--itl-ms', '0', '--prefill-ms-per-token', '0']);
  const lines = [
    `| round | target | req/s | machine busy (of ${cores} cores) | router cores | simulator cores | rest (load generator, kernel) |`,
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const [name, flags] of [
        ['direct', undefined],
        ['router', []],
        ['router, 2 workers', ['--workers', '2']],
      ] as const) {
        const router = flags === undefined ? undefined : await startRouter(ctx, sims, flags);
        try {
          const url = router?.url ?? `http://127.0.0.1:${sims[0]?.port ?? 0}`;
          await runClosedLoop(ctx, { url, path: CHAT_PATH, connections: 32, durationS: 2, bodies });
          const pids = router === undefined ? [] : processTree(router.pid);
          const simPids = sims.map((s) => s.pid);
          const [m0, r0, s0, t0] = [machine(), sumCpu(pids), sumCpu(simPids), performance.now()];
          const load = await runClosedLoop(ctx, { url, path: CHAT_PATH, connections: 32, durationS: seconds, bodies });
          const [m1, r1, s1, wall] = [machine(), sumCpu(pids), sumCpu(simPids), (performance.now() - t0) / 1000];
          const busy = cores * (1 - (m1.idle - m0.idle) / (m1.total - m0.total));
          const [rc, sc] = [(r1 - r0) / wall, (s1 - s0) / wall];
          lines.push(
            `| ${round} | ${name} | ${Math.round(load.rps)} | ${busy.toFixed(2)} | ${rc.toFixed(2)} | ${sc.toFixed(2)} | ${(busy - rc - sc).toFixed(2)} |`,
          );
        } finally {
          await router?.stop();
        }
      }
    }
  } finally {
    await stopSims(sims);
    rmSync(ctx.tmpDir, { recursive: true, force: true });
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
