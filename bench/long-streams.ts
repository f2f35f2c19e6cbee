/**
 * Part two of scenario (c): many concurrent long streams through the router, while the router's
 * RSS and open fds are sampled from /proc; then whether every stream completed with [DONE].
 */
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { procStats, startRouter, startSims, stopSims } from './processes.js';
import type { BenchContext } from './scenario.js';
import { openStream, type StreamTiming } from './stream-client.js';
import { round, seededRandom } from './stats.js';
import { CHAT_PATH, hexId, streamBody } from './workload.js';

/** What the many-streams run measured. */
export interface LongStreamsResult {
  streams: number;
  tokens: number;
  itlMs: number;
  /** Router before any stream (after start-up). */
  idleRssMiB: number;
  idleFds: number;
  /** Peak while every stream was open. */
  peakRssMiB: number;
  peakFds: number;
  /** Seconds until every stream had its first event. */
  openS: number;
  allOpened: boolean;
  /** Streams that ended normally with `data: [DONE]` and status 200. */
  completedWithDone: number;
  failed: number;
  /** First few failure descriptions. */
  failures: string[];
  rssAfterMiB: number;
}

/** Opens `plan.longStreams` streams at once through a router in front of `sims` simulators. */
export async function runLongStreams(ctx: BenchContext): Promise<LongStreamsResult> {
  const { plan } = ctx.options;
  const sims = await startSims(ctx.options.sims, ['--itl-ms', String(plan.longItlMs)], 'c-long');
  try {
    const router = await startRouter(ctx, sims);
    try {
      return await measure(ctx, router.url, router.pid);
    } finally {
      await router.stop();
    }
  } finally {
    await stopSims(sims);
  }
}

async function measure(ctx: BenchContext, base: string, pid: number): Promise<LongStreamsResult> {
  const { plan } = ctx.options;
  const url = new URL(CHAT_PATH, base);
  const idle = procStats(pid);
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const random = seededRandom(3);
  ctx.log(`c: opening ${plan.longStreams} streams of ${plan.longTokens} tokens, ${plan.longItlMs} ms apart, through the router`);
  const t0 = performance.now();
  const streams = Array.from({ length: plan.longStreams }, () => openStream(agent, url, streamBody(plan.longTokens, hexId(random))));
  const deadline = Math.max(30_000, plan.longItlMs * 10);
  const opened = await Promise.race([Promise.all(streams.map((s) => s.firstEvent)).then(() => true), sleep(deadline).then(() => false)]);
  const openS = (performance.now() - t0) / 1000;
  let peakRss = 0;
  let peakFds = 0;
  let anyDone = false;
  const finished = Promise.all(streams.map((s) => s.finished));
  // Done either way: a stream that fails also ends the sampling; its error surfaces at `await finished`.
  const done = (): boolean => (anyDone = true);
  Promise.race(streams.map((s) => s.finished)).then(done, done);
  // Sample while every stream is still open (until the first one ends).
  while (!anyDone) {
    const s = procStats(pid);
    peakRss = Math.max(peakRss, s.rssMiB);
    peakFds = Math.max(peakFds, s.fds);
    await sleep(250);
  }
  const results: StreamTiming[] = await finished;
  agent.destroy();
  const bad = results.filter((r) => !(r.status === 200 && r.complete && r.sawDone));
  const after = procStats(pid);
  return {
    streams: plan.longStreams,
    tokens: plan.longTokens,
    itlMs: plan.longItlMs,
    idleRssMiB: round(idle.rssMiB, 1),
    idleFds: idle.fds,
    peakRssMiB: round(peakRss, 1),
    peakFds,
    openS: round(openS, 2),
    allOpened: opened,
    completedWithDone: results.length - bad.length,
    failed: bad.length,
    failures: bad
      .slice(0, 5)
      .map((r) => `status ${r.status}, ${r.eventsAt.length} events, complete ${r.complete}, [DONE] ${r.sawDone}${r.error ? `, ${r.error}` : ''}`),
    rssAfterMiB: round(after.rssMiB, 1),
  };
}
