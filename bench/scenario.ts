/**
 * The shapes every scenario shares: what it gets (the run context) and what it returns (tables,
 * target checks, charts, notes and its raw data, which `run.ts` writes as JSON).
 */
import type { BenchOptions } from './bench-options.js';
import type { BarChart } from './svg.js';

/** A table: printed to stdout and copied into RESULTS.md. */
export interface Table {
  readonly title: string;
  readonly columns: readonly string[];
  readonly rows: ReadonlyArray<readonly string[]>;
}

/** One target from issue 6, checked against this run's numbers. */
export interface TargetCheck {
  /** e.g. `(a) throughput ≥ 0.4× nginx, zero errors`. */
  readonly target: string;
  /** What was measured, in words (`0.16× nginx, 0 errors`). */
  readonly measured: string;
  /** null = could not be evaluated (a row was skipped). */
  readonly pass: boolean | null;
}

/** Which optional tools were found on this machine. */
export interface ToolSet {
  /** Path of `wrk`, or null when absent. */
  readonly wrk: string | null;
  /** Path of `nginx`, or null when absent. */
  readonly nginx: string | null;
  /** Path of `haproxy`, or null when absent. */
  readonly haproxy: string | null;
}

/** Everything a scenario needs to know about the run. */
export interface BenchContext {
  readonly options: BenchOptions;
  readonly tools: ToolSet;
  /** Temp directory for this run (configs, Lua scripts, nginx prefix); removed at the end. */
  readonly tmpDir: string;
  /** Writes progress to stderr (tables go to stdout). */
  log(message: string): void;
}

/** What a scenario hands back. */
export interface ScenarioResult {
  /** File stem of `bench/results/<id>.json`, e.g. `a-throughput`. */
  readonly id: string;
  readonly title: string;
  readonly tables: Table[];
  readonly targets: TargetCheck[];
  readonly charts: BarChart[];
  /** Caveats and decisions printed under the tables. */
  readonly notes: string[];
  /** The raw numbers, written to the JSON file. */
  readonly data: Record<string, unknown>;
}

/** A scenario: one letter of issue 6 (or the profile). */
export interface Scenario {
  /** The letter used with `--only` (`a`..`e`, `p`). */
  readonly key: string;
  readonly id: string;
  readonly title: string;
  run(ctx: BenchContext): Promise<ScenarioResult>;
}
