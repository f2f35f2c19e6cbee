import { readFileSync } from 'node:fs';
import { mkdir, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { dirname, basename, join } from 'node:path';
import type { ConfigProblem } from '../../config/config-error.js';
import { isPlainObject } from '../../config/config.rules.js';

/** The version this router writes. Files without `version` are pypto-serving-router's (read as 0). */
export const STATE_VERSION = 1;

export interface StateReplica {
  readonly slot: string;
  readonly host: string;
  readonly devices: readonly number[];
  readonly address: string;
  readonly port: number;
  readonly scheme: 'http' | 'https';
  readonly pid: number | null;
  readonly launched_at: string | null;
  readonly model: string | null;
}

export interface StatePin {
  readonly id: string;
  readonly replica: string;
}

export interface FleetState {
  readonly version: number;
  /** Bumped by every router start that reads the file. */
  readonly epoch: number;
  readonly written_at?: string;
  /** The token of the journal whose changes apply on top of `sessions` (state-journal.ts); none in older files. */
  readonly journal?: string;
  readonly replicas: readonly StateReplica[];
  readonly sessions: readonly StatePin[];
}

export type StateRead =
  { readonly kind: 'missing' } | { readonly kind: 'ok'; readonly state: FleetState } | { readonly kind: 'invalid'; readonly problems: ConfigProblem[] };

const isPort = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 65535;

/** Read and validate a state file. Every problem names its path (`--state-file replicas[2].port`). */
export function readStateFile(path: string, read: (p: string) => string = (p) => readFileSync(p, 'utf8')): StateRead {
  let text: string;
  try {
    text = read(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    return { kind: 'invalid', problems: [{ path: '--state-file', message: `cannot read ${path}: ${(e as Error).message}` }] };
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return {
      kind: 'invalid',
      problems: [{ path: '--state-file', message: `${path} is not valid JSON (${(e as Error).message}); start with --discard-state to ignore it` }],
    };
  }
  const problems: ConfigProblem[] = [];
  const at = (p: string): string => `--state-file ${p}`;
  if (!isPlainObject(doc)) return { kind: 'invalid', problems: [{ path: '--state-file', message: `${path} must hold a JSON object` }] };
  const version = doc['version'] ?? 0;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 0) {
    problems.push({ path: at('version'), message: `must be a non-negative integer, got ${JSON.stringify(version)}` });
  } else if (version > STATE_VERSION) {
    problems.push({
      path: at('version'),
      message: `${path} was written by a newer router (version ${version}; this one reads up to ${STATE_VERSION}); start with --discard-state to ignore it`,
    });
  }
  const epoch = doc['epoch'] ?? 0;
  if (typeof epoch !== 'number' || !Number.isInteger(epoch) || epoch < 0) problems.push({ path: at('epoch'), message: 'must be a non-negative integer' });
  const journal = doc['journal'];
  if (journal !== undefined && (typeof journal !== 'string' || journal === '')) problems.push({ path: at('journal'), message: 'must be a non-empty string' });
  const replicas: StateReplica[] = [];
  const rawReplicas = doc['replicas'] ?? [];
  if (!Array.isArray(rawReplicas)) problems.push({ path: at('replicas'), message: 'must be a list' });
  else
    rawReplicas.forEach((r: unknown, i) => {
      const p = `replicas[${i}]`;
      if (!isPlainObject(r)) return void problems.push({ path: at(p), message: 'must be an object' });
      const bad = (f: string, m: string): void => void problems.push({ path: at(`${p}.${f}`), message: m });
      const slot = r['slot'];
      const host = r['host'];
      const address = r['address'];
      const port = r['port'];
      const devices = r['devices'] ?? [];
      const pid = r['pid'] ?? null;
      const scheme = r['scheme'] ?? 'http';
      if (typeof slot !== 'string' || slot === '') bad('slot', 'must be a non-empty string');
      if (typeof host !== 'string') bad('host', 'must be a string');
      if (typeof address !== 'string' || address === '') bad('address', 'must be a non-empty string');
      if (!isPort(port)) bad('port', `must be an integer in 1..65535, got ${JSON.stringify(port)}`);
      if (!Array.isArray(devices) || !devices.every((d) => Number.isInteger(d) && d >= 0)) bad('devices', 'must be a list of device ids');
      if (pid !== null && !(Number.isInteger(pid) && (pid as number) > 0)) bad('pid', 'must be a positive integer or null');
      if (scheme !== 'http' && scheme !== 'https') bad('scheme', 'must be "http" or "https"');
      if (problems.length > 0) return;
      replicas.push({
        slot: slot as string,
        host: host as string,
        devices: devices as number[],
        address: address as string,
        port: port as number,
        scheme: scheme as 'http' | 'https',
        pid: pid as number | null,
        launched_at: typeof r['launched_at'] === 'string' ? r['launched_at'] : null,
        model: typeof r['model'] === 'string' ? r['model'] : null,
      });
    });
  const sessions: StatePin[] = [];
  const rawSessions = doc['sessions'] ?? [];
  if (!Array.isArray(rawSessions)) problems.push({ path: at('sessions'), message: 'must be a list' });
  else
    rawSessions.forEach((s: unknown, i) => {
      if (!isPlainObject(s) || typeof s['id'] !== 'string' || typeof s['replica'] !== 'string') {
        problems.push({ path: at(`sessions[${i}]`), message: 'must be {"id": string, "replica": string}' });
      } else sessions.push({ id: s['id'], replica: s['replica'] });
    });
  if (problems.length > 0) return { kind: 'invalid', problems };
  const state: FleetState = { version: version as number, epoch: epoch as number, replicas, sessions };
  return { kind: 'ok', state: typeof journal === 'string' ? { ...state, journal } : state };
}

/** What a state file holds besides its pins (those come as encoded chunks: state-pins.ts). */
export type StateHead = Omit<FleetState, 'sessions'>;

/** The document up to the first pin: pretty-printed like the rest of the file, pins one per line. */
function headText(h: StateHead): string {
  const json = JSON.stringify({ version: h.version, epoch: h.epoch, written_at: h.written_at, journal: h.journal, replicas: h.replicas }, null, 2);
  return `${json.slice(0, -2)},\n  "sessions": [\n`;
}
const TAIL = Buffer.from('\n  ]\n}\n');

/** Writes all of `bytes`: a nearly full disk accepts part of a write, so loop, and fail when it takes nothing more. */
export async function writeAll(fh: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let off = 0; off < bytes.length;) {
    const { bytesWritten } = await fh.write(bytes, off, bytes.length - off);
    if (bytesWritten <= 0) throw new Error(`short write: ${off} of ${bytes.length} bytes written`);
    off += bytesWritten;
  }
}

/**
 * Write atomically without blocking the event loop: a temporary file in the same directory, fsync,
 * rename over the old one, fsync the directory. A failure (the disk, or `sessions` throwing) leaves
 * the previous file whole. `sessions` yields the encoded `sessions` list a chunk at a time; each
 * chunk is written before the next is asked for, so a producer may reuse one buffer. One writer
 * per path at a time (the temporary file is per process). Resolves to the file's size in bytes.
 */
export async function writeStateFile(path: string, head: StateHead, sessions: AsyncIterable<Uint8Array> | Iterable<Uint8Array> = []): Promise<number> {
  await mkdir(dirname(path), { recursive: true });
  return replaceFile(path, async (put) => {
    await put(Buffer.from(headText(head)));
    for await (const chunk of sessions) await put(chunk);
    await put(TAIL);
  });
}

/**
 * Replace `path` atomically with what `fill` writes through `put`: a temporary file in the same
 * directory (per process), fsync, rename over the old one, fsync the directory. A failure leaves
 * the previous file whole and no temporary behind. Resolves to the bytes written.
 */
export async function replaceFile(path: string, fill: (put: (bytes: Uint8Array) => Promise<void>) => Promise<void>): Promise<number> {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${process.pid}.tmp`);
  const fh = await open(tmp, 'w', 0o600);
  let size = 0;
  try {
    try {
      await fill(async (bytes) => {
        await writeAll(fh, bytes);
        size += bytes.length;
      });
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
  await syncDir(dir);
  return size;
}

/** fsync a directory after a rename in it; some filesystems refuse this, which is tolerated. */
export async function syncDir(dir: string): Promise<void> {
  try {
    const dh = await open(dir, 'r');
    try {
      await dh.sync();
    } finally {
      await dh.close();
    }
  } catch {
    // the rename already happened
  }
}
