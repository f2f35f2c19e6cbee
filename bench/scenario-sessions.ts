/**
 * Scenario (d): the session directory at 1,000,000 sessions. The directory itself is measured in
 * a child process (`--expose-gc`, so the RSS growth is clean); the router's own idle RSS is read
 * from a real router process, and the two are added for the router-with-1M-sessions estimate.
 */
import { SESSION_CHILD } from './bench-options.js';
import { procStats, runReportChild, startRouter, startSims, stopSims } from './processes.js';
import type { BenchContext, Scenario, ScenarioResult } from './scenario.js';
import type { SessionChildReport } from './session-child.js';
import { fmt, round } from './stats.js';

const MB_PER_MIB = 1.048576;

function isReport(v: unknown): v is SessionChildReport {
  if (typeof v !== 'object' || v === null) return false;
  const r = v as Record<string, unknown>;
  return ['sessions', 'lookups', 'rssGrowthMiB', 'lookupTouchNsPerOp', 'insertNsPerOp', 'bytesPerSession'].every((k) => typeof r[k] === 'number');
}

/** Runs the directory child and parses its report line. */
export function runSessionChild(sessions: number, lookups: number): Promise<SessionChildReport> {
  return runReportChild(SESSION_CHILD, [String(sessions), String(lookups)], isReport);
}

async function routerIdleRss(ctx: BenchContext): Promise<number> {
  const sims = await startSims(1, [], 'd');
  try {
    const router = await startRouter(ctx, sims, ['--max-sessions', '1000000']);
    try {
      return procStats(router.pid).rssMiB;
    } finally {
      await router.stop();
    }
  } finally {
    await stopSims(sims);
  }
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const n = ctx.options.plan.sessions;
  ctx.log(`d: filling a SessionDirectory with ${n} sessions in a child process`);
  const r = await runSessionChild(n, n);
  const idle = await routerIdleRss(ctx);
  const estimate = idle + r.rssGrowthMiB;
  const notes = [
    `The directory is the router's own \`SessionDirectory\` (src/modules/affinity/session-directory.ts), filled in a child process run with --expose-gc: ${n} distinct 32-hex ids pinned round-robin over 4 targets, RSS read after two full GCs before and after. Lookup+touch = \`touch(id, now)\` (one hash lookup: the live pin is found and marked used) with \`now = performance.now()\` per operation (what RoutingService does per request), for ${r.lookups} random existing sessions; each operation gets its id as a fresh string made just before (unhashed and hot in the cache, as one just parsed from a request), and the cost of making ids alone (${fmt(r.idNsPerOp, 0)} ns/op) is subtracted. 100,000-operation warm-up, then three timed passes: the best is the target number (the machine is shared), the median is shown beside it. At 1M sessions nearly every touch misses the CPU caches (the directory spans tens of MB), so this measures memory latency as much as code. "bare Map" = the same ids through a plain Map doing only what a move-to-back LRU touch must (get, delete, set): the floor for any Map-based directory that re-orders on every touch; "bare Map get" = get + field update only, what a lazy LRU (re-order only entries older than, say, 1 s) would mostly do.`,
    `Churn at the cap: ${n} more pins of new ids into the full directory (each evicts the least recently used), the longest single \`pin\` call and how many took over 10 ms; then the same on one bare Map (set the new id, delete the oldest), which is what the directory's id map was before it was sharded (src/modules/affinity/sharded-map.ts): V8 rebuilds a Map whole once deletions have used up its free entries, every (capacity − size) insertions at the cap. Every id made here stays alive, so young-generation GCs copy all they find: their pauses (a few to ~40 ms) are in both columns and larger than a router's, whose request garbage mostly dies young.`,
    `Router RSS with ${n} sessions is estimated as the idle router's RSS (a real router process, --max-sessions 1000000) plus the directory's growth; driving ${n} sessions through the HTTP path would take longer than the whole bench. The router's default --max-sessions is 100000: an operator needs --max-sessions 1000000 to keep a million.`,
  ];
  return {
    id: 'd-sessions',
    title: 'Session directory at 1,000,000 sessions',
    tables: [
      {
        title: `(d) SessionDirectory with ${n} sessions`,
        columns: [
          'sessions',
          'RSS growth MiB',
          'heap growth MiB',
          'bytes/session',
          'insert ns/op',
          'lookup+touch ns/op (best of 3)',
          'median of 3',
          'bare Map get+delete+set ns/op',
          'bare Map get ns/op',
          'router idle RSS MiB',
          'router + 1M est. MiB',
          'churn at cap: worst pin ms',
          'pins > 10 ms',
          'bare Map churn: worst ms',
          'bare Map > 10 ms',
        ],
        rows: [
          [
            String(r.sessions),
            fmt(r.rssGrowthMiB, 1),
            fmt(r.heapGrowthMiB, 1),
            fmt(r.bytesPerSession, 0),
            fmt(r.insertNsPerOp, 0),
            fmt(r.lookupTouchNsPerOp, 0),
            fmt(r.lookupTouchMedianNsPerOp, 0),
            fmt(r.bareMapTouchNsPerOp, 0),
            fmt(r.bareMapGetNsPerOp, 0),
            fmt(idle, 1),
            fmt(estimate, 1),
            fmt(r.churnWorstMs, 1),
            String(r.churnOver10),
            fmt(r.bareChurnWorstMs, 1),
            String(r.bareChurnOver10),
          ],
        ],
      },
    ],
    targets: [
      {
        target: `(d) ${n} sessions in < 300 MB router RSS`,
        measured: `${fmt(estimate * MB_PER_MIB, 0)} MB (idle ${fmt(idle * MB_PER_MIB, 0)} MB + directory ${fmt(r.rssGrowthMiB * MB_PER_MIB, 0)} MB)`,
        pass: estimate * MB_PER_MIB < 300,
      },
      { target: '(d) lookup+touch ≤ 2 µs', measured: `${fmt(r.lookupTouchNsPerOp / 1000, 3)} µs`, pass: r.lookupTouchNsPerOp <= 2000 },
    ],
    charts: [
      {
        file: 'd-sessions-rss',
        title: `(d) Router RSS with ${n} sessions (estimate)`,
        unit: 'MiB',
        categories: ['idle router', 'directory growth', 'router + sessions'],
        series: [{ name: 'RSS', values: [idle, r.rssGrowthMiB, estimate] }],
        line: { value: 300 / MB_PER_MIB, label: '300 MB target' },
      },
    ],
    notes,
    data: { child: r, routerIdleRssMiB: round(idle, 1), routerEstimateMiB: round(estimate, 1) },
  };
}

/** Scenario (d). */
export const sessionsScenario: Scenario = { key: 'd', id: 'd-sessions', title: 'Session directory at 1,000,000 sessions', run };
