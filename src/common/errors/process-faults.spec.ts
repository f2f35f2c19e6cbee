import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PassThrough } from 'node:stream';
import { createAppLogger, type AppLogger } from '../logging/logger.js';
import { InternalErrors } from './internal-errors.js';
import { onUncaughtException, onUnhandledRejection, type ProcessFaultDeps } from './process-faults.js';

/** Deps whose log lines, stderr lines and exit codes are recorded. */
function recorded(withLogger: boolean): { deps: ProcessFaultDeps; lines: () => Array<Record<string, unknown>>; stderr: string[]; exits: number[] } {
  const out = new PassThrough();
  const logged: string[] = [];
  out.on('data', (c: Buffer) =>
    logged.push(
      ...c
        .toString()
        .split('\n')
        .filter((l) => l !== ''),
    ),
  );
  const log: AppLogger | undefined = withLogger ? createAppLogger('info', 'json', out) : undefined;
  const stderr: string[] = [];
  const exits: number[] = [];
  const deps: ProcessFaultDeps = { errors: new InternalErrors(), log: () => log, stderr: (l) => stderr.push(l), exit: (c) => exits.push(c) };
  return { deps, lines: () => logged.map((l) => JSON.parse(l) as Record<string, unknown>), stderr, exits };
}

describe('process-level fault handlers', () => {
  it('logs an unhandled rejection as one error line with a running count, counts it, and does not exit', async () => {
    const r = recorded(true);
    onUnhandledRejection(r.deps, new Error('lost promise'));
    onUnhandledRejection(r.deps, 'a string reason');
    await new Promise((resolve) => setImmediate(resolve));
    const lines = r.lines();
    assert.deepEqual(
      lines.map((l) => [l['level'], l['event'], l['source'], l['count']]),
      [
        [50, 'internal_error', 'unhandled_rejection', 1],
        [50, 'internal_error', 'unhandled_rejection', 2],
      ],
    );
    assert.equal((lines[0]['err'] as { message?: unknown }).message, 'lost promise');
    assert.equal(r.deps.errors.count('unhandled_rejection'), 2);
    assert.equal(r.deps.errors.count('data_plane'), 0);
    assert.deepEqual(r.exits, []);
  });

  it('writes a JSON line to stderr for a rejection before the app is up', () => {
    const r = recorded(false);
    onUnhandledRejection(r.deps, new Error('early'));
    assert.equal(r.stderr.length, 1);
    const line = JSON.parse(r.stderr[0]) as Record<string, unknown>;
    assert.deepEqual(
      [line['event'], line['source'], line['count'], (line['err'] as { message?: unknown }).message],
      ['internal_error', 'unhandled_rejection', 1, 'early'],
    );
    assert.deepEqual(r.exits, []);
  });

  it('logs an uncaught exception as fatal and exits 1', async () => {
    const r = recorded(true);
    onUncaughtException(r.deps, new TypeError('half-done update'));
    await new Promise((resolve) => setImmediate(resolve));
    const [line] = r.lines();
    assert.deepEqual([line?.['level'], line?.['event'], (line?.['err'] as { message?: unknown }).message], [60, 'uncaught_exception', 'half-done update']);
    assert.deepEqual(r.exits, [1]);
  });

  it('exits 1 on an uncaught exception even when logging it fails', () => {
    const r = recorded(false);
    const deps: ProcessFaultDeps = {
      ...r.deps,
      stderr: () => {
        throw new Error('stderr closed');
      },
    };
    assert.throws(() => onUncaughtException(deps, new Error('boom')), /stderr closed/);
    assert.deepEqual(r.exits, [1]);
  });
});
