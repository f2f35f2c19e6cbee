/**
 * Benchmark entry point (`npm run bench [-- --quick]`): runs the scenarios of issue 6 one after
 * another (never in parallel: two cores are shared by everything), prints every table, writes
 * `results/<scenario>.json`, `charts/*.svg` and RESULTS.md (RESULTS.quick.md with --quick).
 * Exit code: 0 when every scenario ran (targets may still fail), 1 when one crashed, 2 on bad flags.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { BENCH_DIR, BenchArgsError, parseBenchArgs, type BenchOptions } from './bench-options.js';
import { autoscaleScenario } from './scenario-autoscale.js';
import { fixedLoadScenario } from './scenario-fixed-load.js';
import { prefixScenario } from './scenario-prefix.js';
import { profileScenario } from './scenario-profile.js';
import { productionScenario } from './scenario-production.js';
import { routingScenario } from './scenario-routing.js';
import { sessionsScenario } from './scenario-sessions.js';
import { speedScenario } from './scenario-speed.js';
import { stateFileScenario } from './scenario-statefile.js';
import { streamingScenario } from './scenario-streaming.js';
import { throughputScenario } from './scenario-throughput.js';
import { uploadsScenario } from './scenario-uploads.js';
import { machineInfo, printScenario, tableText, targetsTable, writeReport, writeScenarioFiles, type RanScenario } from './report.js';
import type { BenchContext, Scenario, ScenarioResult, ToolSet } from './scenario.js';
import { findTool } from './tools.js';

/** Every scenario, in run order. */
export const SCENARIOS: readonly Scenario[] = [
  throughputScenario,
  fixedLoadScenario,
  streamingScenario,
  sessionsScenario,
  routingScenario,
  prefixScenario,
  speedScenario,
  profileScenario,
  productionScenario,
  stateFileScenario,
  autoscaleScenario,
  uploadsScenario,
];

/** Hand-written discussion appended to the report when present. */
const ANALYSIS_FILE = join(BENCH_DIR, 'analysis.md');

function failedResult(s: Scenario, err: unknown): ScenarioResult {
  const message = err instanceof Error ? (err.stack ?? err.message) : String(err);
  return {
    id: s.id,
    title: `${s.title} (FAILED)`,
    tables: [],
    targets: [],
    charts: [],
    notes: [`The scenario crashed: ${message.split('\n').slice(0, 6).join(' / ')}`],
    data: { error: message },
  };
}

async function runAll(opts: BenchOptions): Promise<number> {
  const find = (name: string): string | null => (opts.without.includes(name) ? null : findTool(name));
  const tools: ToolSet = { wrk: find('wrk'), nginx: find('nginx'), haproxy: find('haproxy') };
  const tmpDir = mkdtempSync(join(tmpdir(), 'ar-bench-'));
  const ctx: BenchContext = { options: opts, tools, tmpDir, log: (m) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${m}\n`) };
  const machine = machineInfo(tools);
  ctx.log(`mode ${opts.quick ? 'quick' : 'full'}; wrk ${tools.wrk ?? 'absent'}; nginx ${tools.nginx ?? 'absent'}; temp ${tmpDir}`);
  const started = performance.now();
  const ran: RanScenario[] = [];
  let crashed = 0;
  try {
    for (const s of SCENARIOS) {
      if (opts.only !== null && !opts.only.includes(s.key)) continue;
      const t0 = performance.now();
      const startedAt = new Date().toISOString();
      const loadBefore = loadavg().map((l) => Math.round(l * 100) / 100);
      ctx.log(`scenario ${s.key}: ${s.title} (load average ${loadBefore.join(' ')})`);
      let r: ScenarioResult;
      try {
        r = await s.run(ctx);
      } catch (err: unknown) {
        crashed++;
        r = failedResult(s, err);
        ctx.log(`scenario ${s.key} crashed: ${err instanceof Error ? err.message : String(err)}`);
      }
      const elapsedS = Math.round((performance.now() - t0) / 100) / 10;
      ran.push({ result: r, elapsedS, loadBefore });
      printScenario(r);
      writeScenarioFiles(opts, r, { startedAt, elapsedS, loadBefore, machine, plan: opts.plan, sims: opts.sims, tools });
      ctx.log(`scenario ${s.key} done in ${elapsedS} s`);
    }
  } finally {
    rmSync(tmpDir, { recursive: true, force: true });
  }
  const elapsedS = (performance.now() - started) / 1000;
  process.stdout.write(`\n${tableText(targetsTable(ran.map((x) => x.result)))}\n`);
  const extra = !opts.quick && opts.outDir === BENCH_DIR && existsSync(ANALYSIS_FILE) ? readFileSync(ANALYSIS_FILE, 'utf8') : '';
  writeReport(opts, machine, ran, elapsedS, extra);
  ctx.log(`wrote ${opts.reportFile} (${Math.round(elapsedS)} s)`);
  return crashed === 0 ? 0 : 1;
}

let opts: BenchOptions;
try {
  opts = parseBenchArgs(process.argv.slice(2));
} catch (e: unknown) {
  if (!(e instanceof BenchArgsError)) throw e;
  process.stderr.write(`error: ${e.message}\n`);
  process.exit(2);
}
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  // The 'exit' handlers of processes.ts and sim-process.ts SIGKILL every child.
  process.once(sig, () => process.exit(130));
}
runAll(opts).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
