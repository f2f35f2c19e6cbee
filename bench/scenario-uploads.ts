/**
 * Scenario (u), issue 19 acceptance 5: 20 concurrent 60 MB uploads against a router with
 * `--body-memory 256MiB`, and the same burst against one whose budget holds them all (the
 * behaviour before the budget existed, as the baseline of the same run). The router's RSS is
 * sampled from /proc every 20 ms; the answers are counted by status.
 */
import { request } from 'node:http';
import { procStats, startRouter, startSims, stopSims } from './processes.js';
import type { BenchContext, Scenario, ScenarioResult } from './scenario.js';
import { fmt, round } from './stats.js';

const UPLOADS = 20;
const SIZE = 60_000_000;
const BUDGET = '256MiB';
const RSS_LIMIT_MIB = 512;

interface Answer {
  status: number;
  code: string | undefined;
  retryAfter: string | undefined;
}

/** One upload of `body` with its Content-Length; the answer, or status 0 when the connection failed before one. */
function upload(url: string, body: Buffer): Promise<Answer> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (a: Answer): void => {
      if (!settled) resolve(a);
      settled = true;
    };
    const req = request(`${url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(body.length) } });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString('utf8')));
      const finish = (): void => {
        let code: string | undefined;
        try {
          code = (JSON.parse(text) as { code?: string }).code;
        } catch {
          code = undefined;
        }
        done({ status: res.statusCode ?? 0, code, retryAfter: res.headers['retry-after'] });
      };
      res.on('end', finish);
      res.on('error', finish);
    });
    // A refused upload is cut while it is still being written: its answer came first (or never).
    req.on('error', () => setTimeout(() => done({ status: 0, code: undefined, retryAfter: undefined }), 200));
    req.end(body);
  });
}

interface Run {
  label: string;
  flags: string[];
  ok: number;
  overloaded: number;
  overloadedWithRetryAfter: number;
  other: number;
  peakRssMiB: number;
  idleRssMiB: number;
  seconds: number;
}

async function burst(ctx: BenchContext, label: string, flags: string[], body: Buffer): Promise<Run> {
  const sims = await startSims(1, [], 'u');
  try {
    const router = await startRouter(ctx, sims, flags);
    try {
      const idle = procStats(router.pid).rssMiB;
      let peak = idle;
      const sampler = setInterval(() => {
        try {
          peak = Math.max(peak, procStats(router.pid).rssMiB);
        } catch {
          // the router exited; the answers will say so
        }
      }, 20);
      const t0 = performance.now();
      const answers = await Promise.all(Array.from({ length: UPLOADS }, () => upload(router.url, body)));
      const seconds = (performance.now() - t0) / 1000;
      clearInterval(sampler);
      peak = Math.max(peak, procStats(router.pid).rssMiB);
      const overloaded = answers.filter((a) => a.status === 503 && a.code === 'overloaded');
      const run: Run = {
        label,
        flags,
        ok: answers.filter((a) => a.status === 200).length,
        overloaded: overloaded.length,
        overloadedWithRetryAfter: overloaded.filter((a) => a.retryAfter === '1').length,
        other: answers.filter((a) => a.status !== 200 && !(a.status === 503 && a.code === 'overloaded')).length,
        peakRssMiB: round(peak, 1),
        idleRssMiB: round(idle, 1),
        seconds: round(seconds, 2),
      };
      ctx.log(`u ${label}: ${JSON.stringify(run)}`);
      return run;
    } finally {
      await router.stop();
    }
  } finally {
    await stopSims(sims);
  }
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const body = Buffer.alloc(SIZE, 0x61);
  body.write(`{"model":"sim-model","input":"`, 0, 'latin1');
  body.write('"}', SIZE - 2, 'latin1');
  const unbounded = await burst(ctx, 'budget holds all (4GiB)', ['--body-memory', '4GiB'], body);
  const bounded = await burst(ctx, `--body-memory ${BUDGET}`, ['--body-memory', BUDGET], body);
  const rows = [unbounded, bounded].map((r) => [
    r.label,
    String(r.ok),
    `${r.overloaded} (${r.overloadedWithRetryAfter} with Retry-After)`,
    String(r.other),
    fmt(r.idleRssMiB, 0),
    fmt(r.peakRssMiB, 0),
    fmt(r.seconds, 1),
  ]);
  return {
    id: 'u-uploads',
    title: `(u) Body memory: ${UPLOADS} concurrent ${SIZE / 1e6} MB uploads`,
    tables: [{ title: 'answers and router RSS', columns: ['router', '200', '503 overloaded', 'other', 'idle RSS MiB', 'peak RSS MiB', 'seconds'], rows }],
    targets: [
      {
        target: `(u) ${UPLOADS} × 60 MB with --body-memory ${BUDGET}: RSS < ${RSS_LIMIT_MIB} MiB, over-budget ones 503 overloaded with Retry-After, the rest 200`,
        measured: `peak RSS ${fmt(bounded.peakRssMiB, 0)} MiB; ${bounded.ok} × 200, ${bounded.overloaded} × 503 overloaded (${bounded.overloadedWithRetryAfter} with Retry-After), ${bounded.other} other`,
        pass:
          bounded.peakRssMiB < RSS_LIMIT_MIB &&
          bounded.other === 0 &&
          bounded.ok > 0 &&
          bounded.overloaded === bounded.overloadedWithRetryAfter &&
          bounded.ok + bounded.overloaded === UPLOADS,
      },
    ],
    charts: [],
    notes: [
      'Uploads go to /v1/embeddings, which the simulator answers with a small echo after hashing the body, so the router holds each body from its first byte to the answer.',
      'The baseline run gives the router a budget that holds every body (4GiB), as before --body-memory existed.',
    ],
    data: { uploads: UPLOADS, size: SIZE, runs: [unbounded, bounded] },
  };
}

export const uploadsScenario: Scenario = { key: 'u', id: 'u-uploads', title: '(u) body memory budget under concurrent uploads', run };
