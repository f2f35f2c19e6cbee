/**
 * Smoke run of the benchmark harness (issue 6), not a benchmark: scenario (a) for 1 s per phase
 * against one simulator, written to a temp dir. Checks from outside that the harness exits 0,
 * prints its tables, writes the JSON result with the documented shape, the report and the SVG
 * chart, skips a tool it is told is absent (haproxy) with a note, and leaves no router or nginx
 * behind.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { killRunning, runNode, type Exit } from '../support/run-node.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

const RUN = fileURLToPath(new URL('../../bench/run.js', import.meta.url));
const DEADLINE_MS = 60_000;

after(() => killRunning());

/** Runs the bench; at the deadline SIGINT, so it still stops what it started. */
function runBench(args: string[]): Promise<Exit> {
  return runNode(RUN, args, { deadlineMs: DEADLINE_MS, killSignal: 'SIGINT' });
}

/** Command lines of live processes mentioning `needle` (e.g. the bench's temp dir). */
function processesMentioning(needle: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes(needle)) found.push(`${pid}: ${cmd}`);
    } catch {
      // the process is gone
    }
  }
  return found;
}

function record(v: unknown): Record<string, unknown> {
  assert.ok(typeof v === 'object' && v !== null && !Array.isArray(v), `expected an object, got ${JSON.stringify(v)}`);
  return v as Record<string, unknown>;
}

describe('bench harness smoke run', () => {
  it('runs scenario (a) for 1 s against one simulator and writes tables, JSON, report and chart', async () => {
    const out = tempDir('ar-bench-smoke-');
    const r = await runBench(['--only', 'a', '--duration', '1', '--sims', '1', '--without', 'haproxy', '--out', out]);
    assert.equal(r.code, 0, `bench exited ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
    assert.match(r.stdout, /\(a\) Throughput, 32 connections/);
    assert.match(r.stdout, /\(a\) Latency at 1 connection/);
    assert.match(r.stdout, /Targets from issue 6/);

    const doc = record(JSON.parse(readFileSync(join(out, 'results', 'a-throughput.json'), 'utf8')));
    assert.equal(doc['scenario'], 'a-throughput');
    assert.equal(doc['mode'], 'full');
    const data = record(doc['data']);
    assert.equal(data['connections'], 32);
    const rows = data['rows'];
    assert.ok(Array.isArray(rows));
    const targets = rows.map((row) => record(row)['target']);
    assert.deepEqual(targets.slice(0, 3), ['direct', 'router', 'router, 2 workers']);
    for (const row of rows) {
      const throughput = record(record(row)['throughput']);
      assert.ok(typeof throughput['rps'] === 'number' && throughput['rps'] > 0, `no throughput in ${JSON.stringify(row)}`);
      assert.equal(throughput['errors'], 0, `socket errors in ${JSON.stringify(row)}`);
      assert.equal(throughput['non2xx'], 0, `non-2xx answers in ${JSON.stringify(row)}`);
      assert.ok(typeof record(record(row)['oneConnection'])['p50Ms'] === 'number');
    }
    const notes = doc['notes'];
    assert.ok(
      Array.isArray(notes) && notes.some((n) => /haproxy is not installed: its reference row is skipped/.test(String(n))),
      'a missing tool must be skipped with a note',
    );
    assert.ok(!targets.includes('haproxy'));
    const checks = doc['targets'];
    assert.ok(Array.isArray(checks) && checks.length === 4);
    for (const c of checks) assert.ok([true, false, null].includes(record(c)['pass'] as boolean | null));

    const report = readFileSync(join(out, 'RESULTS.md'), 'utf8');
    assert.match(report, /## Targets/);
    assert.match(report, /\| nproc \|/);
    assert.match(report, /!\[\(a\) Throughput at 32 connections\]\(charts\/a-throughput\.svg\)/);
    assert.match(readFileSync(join(out, 'charts', 'a-throughput.svg'), 'utf8'), /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);

    const tmp = /temp (\/\S+)/.exec(r.stderr)?.[1];
    assert.ok(tmp !== undefined, `the bench did not log its temp dir:\n${r.stderr}`);
    assert.deepEqual(processesMentioning(tmp), [], 'router/nginx processes outlived the bench');
    assert.equal(existsSync(tmp), false, 'the temp dir was not removed');
  });

  it('refuses an unknown scenario with exit code 2 and a message naming it', async () => {
    const r = await runBench(['--only', 'z']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--only: unknown scenario "z"/);
  });
});
