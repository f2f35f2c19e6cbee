/**
 * Command-line options of `node dist-test/bench/run.js` and the durations/sizes of every scenario
 * in full and `--quick` mode.
 *
 *   --quick            short durations (whole run < 5 minutes); writes RESULTS.quick.md
 *   --only a,c         run only these scenarios (a b c d e x v p w s g u)
 *   --duration S       override every timed phase with S seconds (smoke runs)
 *   --sims N           simulators behind the router/nginx in a, b, c (default 2)
 *   --out DIR          where results/, charts/ and RESULTS*.md go (default: the bench/ folder)
 *   --without T,...    act as if these tools were not installed (wrk, nginx, haproxy)
 *   --workers N        run every router with `--workers N` (default 1); (a), (c), (e) and (x) also
 *                      measure a 2-worker row beside the default one in the same run
 */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

/** Durations (seconds) and sizes of every scenario. */
export interface BenchPlan {
  warmupS: number;
  /** Warm-up of each open-loop run in (b) (the generator's own JIT settles too). */
  fixedWarmupS: number;
  throughputS: number;
  latency1S: number;
  /** Scenario (a) interleaves its targets in this many rounds (throughputS and latency1S are split). */
  rounds: number;
  fixedLoadS: number;
  fixedRate: number;
  streamCount: number;
  streamTokens: number;
  streamItlMs: number;
  longStreams: number;
  longTokens: number;
  longItlMs: number;
  sessions: number;
  routingS: number;
  routingRate: number;
  profileS: number;
  /** Scenario (w): resident streams, new sessions/s, ramp, load and node-proxy comparison seconds. */
  productionStreams: number;
  productionRate: number;
  productionRampS: number;
  productionS: number;
  productionCompareS: number;
}

/** Parsed options. */
export interface BenchOptions {
  readonly quick: boolean;
  /** Scenario keys to run, or null for all. */
  readonly only: readonly string[] | null;
  readonly durationOverride: number | null;
  readonly sims: number;
  /** `--workers` of every router the bench starts (the extra 2-worker rows keep their 2). */
  readonly workers: number;
  /** Tools to treat as absent (`--without`), to exercise the fallbacks. */
  readonly without: readonly string[];
  /** Directory receiving `results/`, `charts/` and the RESULTS file. */
  readonly outDir: string;
  readonly resultsDir: string;
  readonly chartsDir: string;
  /** Path of chartsDir relative to the RESULTS file (for links). */
  readonly chartsLink: string;
  readonly reportFile: string;
  readonly plan: BenchPlan;
  /** The argv as given (for the report's "exact command"). */
  readonly argv: readonly string[];
}

/** Thrown for an unknown flag or a bad value; the message names the flag. */
export class BenchArgsError extends Error {
  override readonly name = 'BenchArgsError';
}

/** Optional tools the bench looks for. */
export const OPTIONAL_TOOLS: readonly string[] = ['wrk', 'nginx', 'haproxy'];

/** The scenario keys, in run order. */
export const SCENARIO_KEYS = ['a', 'b', 'c', 'd', 'e', 'x', 'v', 'p', 'w', 's', 'g', 'u'] as const;

const HERE = dirname(fileURLToPath(import.meta.url));
/** The repository's `bench/` folder (this file compiles to `dist-test/bench/`). */
export const BENCH_DIR = resolve(HERE, '../../bench');
/** Compiled router entry (`dist-test/src/main.js`). */
export const MAIN_ENTRY = resolve(HERE, '../src/main.js');
/** Compiled session directory module, loaded by the scenario-d child. */
export const SESSION_DIRECTORY_MODULE = resolve(HERE, '../src/modules/affinity/session-directory.js');
/** Compiled scenario-d child script. */
export const SESSION_CHILD = resolve(HERE, 'session-child.js');
/** Compiled scenario-x child script. */
export const PREFIX_CHILD = resolve(HERE, 'prefix-child.js');

function fullPlan(): BenchPlan {
  return {
    warmupS: 2,
    fixedWarmupS: 3,
    throughputS: 15,
    latency1S: 9,
    rounds: 3,
    fixedLoadS: 30,
    fixedRate: 500,
    streamCount: 50,
    streamTokens: 20,
    streamItlMs: 50,
    longStreams: 1000,
    longTokens: 30,
    longItlMs: 1000,
    sessions: 1_000_000,
    routingS: 60,
    routingRate: 30,
    profileS: 10,
    productionStreams: 2000,
    productionRate: 2,
    productionRampS: 40,
    productionS: 300,
    productionCompareS: 60,
  };
}

function quickPlan(): BenchPlan {
  return {
    ...fullPlan(),
    warmupS: 1,
    fixedWarmupS: 2,
    throughputS: 3,
    latency1S: 2,
    rounds: 1,
    fixedLoadS: 8,
    streamCount: 8,
    longTokens: 12,
    routingS: 12,
    profileS: 3,
    productionRampS: 10,
    productionS: 20,
    productionCompareS: 15,
  };
}

function positive(flag: string, raw: string, integer: boolean): number {
  const n = raw.trim() === '' ? NaN : Number(raw);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new BenchArgsError(`${flag}: "${raw}" is not a positive ${integer ? 'integer' : 'number'}`);
  }
  return n;
}

/** The flags `parseArgs` splits out: a value for each, but `--quick`. */
const FLAGS = {
  quick: { type: 'boolean' },
  only: { type: 'string' },
  duration: { type: 'string' },
  sims: { type: 'string' },
  workers: { type: 'string' },
  out: { type: 'string' },
  without: { type: 'string' },
} as const;

type Flag = keyof typeof FLAGS;

const isFlag = (name: string): name is Flag => Object.hasOwn(FLAGS, name);

/** Every flag, for the unknown-flag message. */
const KNOWN = Object.keys(FLAGS)
  .map((f) => `--${f}`)
  .join(' ');

/** Comma-separated words, trimmed, empty ones dropped. */
const list = (raw: string): string[] =>
  raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');

/**
 * Parses the bench argv (without node and the script). `node:util` `parseArgs` splits the words
 * into flags and values (`--flag value` or `--flag=value`); it runs non-strict so that the checks,
 * and their messages, are the bench's own. A repeated flag keeps its last value.
 */
export function parseBenchArgs(argv: readonly string[]): BenchOptions {
  let quick = false;
  let only: string[] | null = null;
  let durationOverride: number | null = null;
  let sims = 2;
  let workers = 1;
  let outDir = BENCH_DIR;
  let without: string[] = [];
  const { tokens } = parseArgs({ args: [...argv], options: FLAGS, strict: false, allowPositionals: true, tokens: true });
  for (const t of tokens) {
    const flag = t.kind === 'option' ? t.rawName : t.kind === 'positional' ? t.value : '--';
    if (t.kind !== 'option' || !flag.startsWith('--') || !isFlag(t.name)) {
      throw new BenchArgsError(`unknown flag ${flag} (known: ${KNOWN})`);
    }
    if (t.name === 'quick') {
      if (t.value !== undefined) throw new BenchArgsError(`${flag} takes no value`);
      quick = true;
      continue;
    }
    if (t.value === undefined) throw new BenchArgsError(`${flag} needs a value`);
    const value = t.value;
    switch (t.name) {
      case 'only': {
        only = list(value);
        const unknown = only.filter((k) => !(SCENARIO_KEYS as readonly string[]).includes(k));
        if (unknown.length > 0 || only.length === 0) {
          throw new BenchArgsError(`--only: unknown scenario "${unknown.join(',')}" (choose from ${SCENARIO_KEYS.join(',')})`);
        }
        break;
      }
      case 'duration':
        durationOverride = positive(flag, value, false);
        break;
      case 'sims':
        sims = positive(flag, value, true);
        break;
      case 'workers':
        workers = positive(flag, value, true);
        break;
      case 'out':
        outDir = resolve(value);
        break;
      case 'without': {
        without = list(value);
        const unknown = without.filter((w) => !OPTIONAL_TOOLS.includes(w));
        if (unknown.length > 0) throw new BenchArgsError(`--without: unknown tool "${unknown.join(',')}" (choose from ${OPTIONAL_TOOLS.join(',')})`);
        break;
      }
    }
  }
  const plan = quick ? quickPlan() : fullPlan();
  if (durationOverride !== null) {
    const d = durationOverride;
    Object.assign(plan, {
      warmupS: Math.min(plan.warmupS, d),
      fixedWarmupS: Math.min(plan.fixedWarmupS, d),
      throughputS: d,
      latency1S: d,
      rounds: 1,
      fixedLoadS: d,
      routingS: d,
      profileS: d,
      productionS: d,
      productionCompareS: Math.min(plan.productionCompareS, d),
      productionRampS: Math.min(plan.productionRampS, d),
    });
  }
  const sub = quick ? 'quick' : '';
  return {
    quick,
    only,
    durationOverride,
    sims,
    workers,
    without,
    outDir,
    resultsDir: resolve(outDir, 'results', sub),
    chartsDir: resolve(outDir, 'charts', sub),
    chartsLink: quick ? 'charts/quick' : 'charts',
    reportFile: resolve(outDir, quick ? 'RESULTS.quick.md' : 'RESULTS.md'),
    plan,
    argv,
  };
}
