/**
 * Reads a V8 `.cpuprofile` (written by `node --cpu-prof`) and attributes self time to functions
 * and to coarse owners (a node_modules package, a Node core area, a router module, GC, idle), to
 * show where the router's time goes.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  hitCount?: number;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

/** Self time of one function or owner. */
export interface ProfileEntry {
  name: string;
  selfMs: number;
  /** Share of all non-idle samples. */
  share: number;
  /** Share of non-idle samples with this owner anywhere on the stack (owners only). */
  inclusiveShare?: number;
}

/** The profile boiled down. */
export interface ProfileSummary {
  durationMs: number;
  /** Share of samples not idle. */
  busyShare: number;
  byOwner: ProfileEntry[];
  topFunctions: ProfileEntry[];
}

function isProfile(v: unknown): v is CpuProfile {
  return typeof v === 'object' && v !== null && 'nodes' in v && Array.isArray(v.nodes) && 'startTime' in v && 'endTime' in v;
}

/** Who owns a frame: `fastify`, `@nestjs/core`, `node:http`, `router: proxy`, `(garbage collector)`... */
export function ownerOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url === '') return functionName.startsWith('(') ? functionName : `(native) ${functionName || 'anonymous'}`;
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') === true ? `${rest[0]}/${rest[1] ?? ''}` : (rest[0] ?? url);
  }
  if (url.startsWith('node:')) {
    const mod = url.slice(5).replace(/^internal\//, '');
    if (/^(_http|http|https)/.test(mod) || mod.startsWith('http')) return 'node: http';
    if (/^(net|stream|streams|_stream|tcp|dns)/.test(mod) || mod.startsWith('stream')) return 'node: net/streams';
    if (/^(timers|process\/task_queues|async_hooks|event|events)/.test(mod)) return 'node: timers/events';
    return `node: ${mod.split('/')[0] ?? mod}`;
  }
  const src = /\/src\/(?:modules\/)?([^/]+)\//.exec(url);
  if (src !== null) return `router: ${src[1] ?? ''}`;
  return url.split('/').slice(-2).join('/');
}

/**
 * Summarises `file`; `top` = how many functions to list. With `window` (milliseconds after the
 * profile's start) only the samples inside it count (e.g. the load phase, not start-up).
 */
export function summarizeProfile(file: string, top = 15, window?: { fromMs: number; toMs: number }): ProfileSummary {
  const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
  if (!isProfile(parsed)) throw new Error(`${file} is not a V8 cpuprofile (no nodes/startTime/endTime)`);
  let durationMs = (parsed.endTime - parsed.startTime) / 1000;
  const byId = new Map(parsed.nodes.map((n) => [n.id, n]));
  // Self time per node: sum of the time deltas of its samples (precise), else hitCount × mean.
  const self = new Map<number, number>();
  if (parsed.samples !== undefined && parsed.timeDeltas !== undefined) {
    const deltas = parsed.timeDeltas;
    let at = 0;
    parsed.samples.forEach((id, i) => {
      at += (deltas[i] ?? 0) / 1000;
      if (window !== undefined && (at < window.fromMs || at > window.toMs)) return;
      self.set(id, (self.get(id) ?? 0) + (deltas[i + 1] ?? 0) / 1000);
    });
    if (window !== undefined) durationMs = Math.min(durationMs, window.toMs) - window.fromMs;
  } else {
    const hits = parsed.nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0);
    for (const n of parsed.nodes) self.set(n.id, ((n.hitCount ?? 0) / Math.max(1, hits)) * durationMs);
  }
  // Owners anywhere on each node's stack (parents first), for inclusive shares.
  const parent = new Map<number, number>();
  for (const n of parsed.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stackOwners = new Map<number, Set<string>>();
  const ownersOnStack = (id: number): Set<string> => {
    const known = stackOwners.get(id);
    if (known !== undefined) return known;
    const chain: number[] = [];
    let cur: number | undefined = id;
    while (cur !== undefined && !stackOwners.has(cur)) {
      chain.push(cur);
      cur = parent.get(cur);
    }
    let acc: Set<string> = cur === undefined ? new Set() : (stackOwners.get(cur) ?? new Set());
    for (let i = chain.length - 1; i >= 0; i--) {
      const nid = chain[i] ?? 0;
      const frame = byId.get(nid)?.callFrame;
      const next = new Set(acc);
      if (frame !== undefined && !frame.functionName.startsWith('(')) next.add(ownerOf(frame));
      stackOwners.set(nid, next);
      acc = next;
    }
    return acc;
  };
  const inclusive = new Map<string, number>();
  let idle = 0;
  let total = 0;
  const owners = new Map<string, number>();
  const functions = new Map<string, number>();
  for (const [id, ms] of self) {
    const node = byId.get(id);
    if (node === undefined) continue;
    total += ms;
    const f = node.callFrame;
    if (f.functionName === '(idle)') {
      idle += ms;
      continue;
    }
    const owner = ownerOf(f);
    owners.set(owner, (owners.get(owner) ?? 0) + ms);
    for (const o of ownersOnStack(id)) inclusive.set(o, (inclusive.get(o) ?? 0) + ms);
    const where = f.url === '' ? '' : ` ${f.url.replace(/^.*\/(node_modules|dist-test)\//, '$1/')}:${f.lineNumber + 1}`;
    const fname = `${f.functionName || '(anonymous)'}${where}`;
    functions.set(fname, (functions.get(fname) ?? 0) + ms);
  }
  const busy = total - idle;
  const entries = (m: Map<string, number>, n: number): ProfileEntry[] =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, ms]) => ({ name, selfMs: Math.round(ms), share: busy > 0 ? ms / busy : 0 }));
  const byOwner = entries(owners, 20).map((e) => ({ ...e, inclusiveShare: busy > 0 ? (inclusive.get(e.name) ?? 0) / busy : 0 }));
  return { durationMs, busyShare: total > 0 ? busy / total : 0, byOwner, topFunctions: entries(functions, top) };
}
