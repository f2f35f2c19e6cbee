/**
 * Output of a bench run: tables on stdout, `results/<id>.json`, `charts/*.svg` and the
 * RESULTS(.quick).md report with the machine, versions, command, targets and every table.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join, relative } from 'node:path';
import type { BenchOptions } from './bench-options.js';
import type { ScenarioResult, Table, TargetCheck, ToolSet } from './scenario.js';
import { renderBarChart } from './svg.js';

/** The machine and tool versions the report starts with. */
export interface MachineInfo {
  date: string;
  nproc: number;
  cpuModel: string;
  memoryGiB: number;
  kernel: string;
  node: string;
  nginx: string;
  wrk: string;
  haproxy: string;
  /** 1/5/15-minute load averages when the run started (other work on the machine skews results). */
  loadAtStart: number[];
}

function firstLine(cmd: string | null, args: string[]): string {
  if (cmd === null) return 'not installed';
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  const text = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n')[0] ?? '';
  return text === '' ? 'unknown' : text;
}

/** Reads nproc, CPU model, memory and tool versions. */
export function machineInfo(tools: ToolSet): MachineInfo {
  const cpuinfo = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? 'unknown';
  return {
    date: new Date().toISOString(),
    nproc: os.availableParallelism(),
    cpuModel: model.trim(),
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    nginx: firstLine(tools.nginx, ['-v']),
    wrk: firstLine(tools.wrk, ['--version']).replace(/\s+Copyright.*$/, ''),
    haproxy: firstLine(tools.haproxy, ['-v']),
    loadAtStart: os.loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

function widths(t: Table): number[] {
  return t.columns.map((c, i) => Math.max(c.length, ...t.rows.map((r) => (r[i] ?? '').length)));
}

/** A table as aligned plain text (stdout). */
export function tableText(t: Table): string {
  const w = widths(t);
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => c.padEnd(w[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [t.title, line(t.columns), w.map((n) => '-'.repeat(n)).join('  '), ...t.rows.map(line)].join('\n');
}

/** A table as GitHub markdown. */
export function tableMarkdown(t: Table): string {
  const esc = (s: string): string => s.replace(/\|/g, '\\|');
  const head = `| ${t.columns.map(esc).join(' | ')} |`;
  const sep = `|${t.columns.map(() => '---').join('|')}|`;
  return [`**${t.title}**`, '', head, sep, ...t.rows.map((r) => `| ${r.map(esc).join(' | ')} |`)].join('\n');
}

function passText(p: boolean | null): string {
  return p === null ? 'n/a' : p ? 'pass' : '**FAIL**';
}

/** The targets of every scenario as one table. */
export function targetsTable(results: readonly ScenarioResult[]): Table {
  const all: TargetCheck[] = results.flatMap((r) => r.targets);
  return { title: 'Targets from issue 6', columns: ['target', 'measured', 'result'], rows: all.map((t) => [t.target, t.measured, passText(t.pass)]) };
}

/** Prints a scenario's tables and notes to stdout. */
export function printScenario(r: ScenarioResult): void {
  const out = [`\n=== ${r.title} ===`];
  for (const t of r.tables) out.push(`\n${tableText(t)}`);
  for (const t of r.targets) out.push(`target ${t.target}: ${t.measured} -> ${passText(t.pass).replace(/\*/g, '')}`);
  for (const n of r.notes) out.push(`note: ${n}`);
  process.stdout.write(`${out.join('\n')}\n`);
}

/** Writes `results/<id>.json` and the scenario's charts. */
export function writeScenarioFiles(opts: BenchOptions, r: ScenarioResult, meta: Record<string, unknown>): void {
  mkdirSync(opts.resultsDir, { recursive: true });
  mkdirSync(opts.chartsDir, { recursive: true });
  const doc = {
    scenario: r.id,
    title: r.title,
    mode: opts.quick ? 'quick' : 'full',
    ...meta,
    targets: r.targets,
    notes: r.notes,
    tables: r.tables,
    data: r.data,
  };
  writeFileSync(join(opts.resultsDir, `${r.id}.json`), `${JSON.stringify(doc, null, 2)}\n`);
  for (const c of r.charts) writeFileSync(join(opts.chartsDir, `${c.file}.svg`), renderBarChart(c));
}

/** A scenario's result with when/how long it ran. */
export interface RanScenario {
  readonly result: ScenarioResult;
  readonly elapsedS: number;
  /** 1/5/15-minute load averages just before it started. */
  readonly loadBefore: readonly number[];
}

/** Writes RESULTS.md (or RESULTS.quick.md) for the scenarios that ran. */
export function writeReport(opts: BenchOptions, machine: MachineInfo, ran: readonly RanScenario[], elapsedS: number, extra: string): void {
  const results = ran.map((r) => r.result);
  const cmd = `npm run bench${opts.argv.length > 0 ? ` -- ${opts.argv.join(' ')}` : ''}`;
  const md: string[] = [
    `# affinity-router benchmarks${opts.quick ? ' (quick run)' : ''}`,
    '',
    `Generated by \`bench/run.ts\` on ${machine.date} in ${Math.round(elapsedS)} s. Every number below was measured in this one run on this machine; load generator, router, nginx and simulators share its cores.`,
    '',
    '## Machine and versions',
    '',
    '| nproc | CPU | memory | kernel | Node | nginx | wrk | haproxy |',
    '|---|---|---|---|---|---|---|---|',
    `| ${machine.nproc} | ${machine.cpuModel} | ${machine.memoryGiB} GiB | ${machine.kernel} | ${machine.node} | ${machine.nginx} | ${machine.wrk} | ${machine.haproxy} |`,
    '',
    `Load average (1/5/15 min) at the start: ${machine.loadAtStart.join(' / ')}; at the end: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' / ')}.` +
      (machine.loadAtStart[0] !== undefined && machine.loadAtStart[0] > machine.nproc / 2
        ? ' **The machine was busy with other work when the run started: absolute numbers are pessimistic; ratios measured back to back are more robust.**'
        : ''),
    '',
    '## Command',
    '',
    '```sh',
    cmd,
    `# = npm run build:test && node dist-test/bench/run.js${opts.argv.length > 0 ? ` ${opts.argv.join(' ')}` : ''}`,
    '```',
    '',
    `Raw numbers: \`${relative(opts.outDir, opts.resultsDir) || '.'}/<scenario>.json\`.`,
    '',
    '## Targets',
    '',
    tableMarkdown(targetsTable(results)),
    '',
  ];
  for (const { result: r, elapsedS: took, loadBefore } of ran) {
    md.push(`## ${r.title}`, '', `_Ran ${took} s; load average before it: ${loadBefore.join(' / ')}._`, '');
    for (const t of r.tables) md.push(tableMarkdown(t), '');
    for (const c of r.charts) md.push(`![${c.title}](${opts.chartsLink}/${c.file}.svg)`, '');
    for (const n of r.notes) md.push(`- ${n}`);
    if (r.notes.length > 0) md.push('');
  }
  if (extra.trim() !== '') md.push(extra.trim(), '');
  mkdirSync(opts.outDir, { recursive: true });
  writeFileSync(opts.reportFile, `${md.join('\n')}\n`);
}
