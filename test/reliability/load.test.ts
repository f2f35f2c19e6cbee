/**
 * Issue 7, scenario 11 (CI variant): 2,000 concurrent client connections mixing streams and
 * short requests against three simulators through the router process. The long variant (60 s)
 * runs in `npm run soak`.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawnSim, stopAllSims } from '../support/sim-process.js';
import { waitFor, writeTempConfig } from '../support/router.js';
import { accounting, openFileLimit, runLoad, startQuietRouter, type QuietRouter } from './load.js';

const CONNECTIONS = 2_000;
const DURATION_MS = 10_000;

describe('load: 2,000 connections (issue 7 §11)', () => {
  let router: QuietRouter | undefined;
  after(async () => {
    await router?.stop();
    await stopAllSims();
  });

  it('serves 2,000 concurrent connections for 10 s with zero router errors, every request accounted, in-flight back to 0', async (t) => {
    const limit = openFileLimit();
    if (limit < 4_096) return t.skip(`open-files limit ${limit} < 4096: raise it (ulimit -n) to run the 2,000-connection load`);
    const sims = await Promise.all(['l0', 'l1', 'l2'].map((name) => spawnSim({ name, args: ['--itl-ms', '5'] })));
    const cfg = writeTempConfig({ replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })) });
    router = await startQuietRouter(['--config', cfg, '--health-interval', '1']);

    const result = await runLoad({ url: router.url, connections: CONNECTIONS, durationMs: DURATION_MS, streamShare: 0.3 });
    const summary = JSON.stringify({ ...result, failures: result.failures.slice(0, 5) });
    t.diagnostic(`load: ${summary}`);
    // A connect timeout from the router's own connection burst must never demote a live replica
    // (fixed: connections per replica are capped, and a connect timeout is no health signal).
    const demotions = readFileSync(router.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes('"event":"unready"') && /connect failed/.test(l));
    assert.deepEqual(demotions, [], 'live replicas demoted on connect failures during the load');
    // accounting holds whatever happened
    const acc = await waitFor(
      async () => {
        const a = await accounting(router!.url);
        return a.received === a.terminated && a.inflight === 0 ? a : undefined;
      },
      5_000,
      'received = Σ terminations and in-flight 0',
    );
    assert.equal(acc.received, result.sent, 'the router received exactly what the clients sent');
    assert.ok(result.sent > CONNECTIONS, `every connection sent at least one request: ${summary}`);
    assert.equal(result.serverErrors, 0, `5xx answers: ${summary}`);
    assert.equal(result.resets, 0, `connection errors: ${summary}`);
    assert.equal(result.incomplete, 0, `incomplete responses: ${summary}`);
    assert.equal(result.timeouts, 0, `timeouts: ${summary}`);
    assert.equal(result.ok, result.sent, `every request answered 200 and complete: ${summary}`);
    assert.ok(result.streams > 0, 'streams were part of the mix');

    assert.equal(acc.byCause['ok'], result.sent, `every request ended ok: ${JSON.stringify(acc.byCause)}`);
    const stats = await Promise.all(sims.map((s) => s.stats()));
    assert.equal(
      stats.reduce((n, s) => n + s.requests, 0),
      result.sent,
      'each request reached exactly one replica once',
    );
    assert.ok(
      stats.every((s) => s.inflight === 0 && s.requests > 0),
      'every replica served and is idle',
    );
    assert.deepEqual(router.problems().lines, [], 'no warning or error logged by the router');
  });
});
