import { randomBytes } from 'node:crypto';
import { constants, readFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import type { ConfigProblem } from '../../config/config-error.js';
import { isPlainObject } from '../../config/config.rules.js';
import { LoopHold } from './loop-hold.js';
import { replaceFile, writeAll, type FleetState, type StatePin } from './state-file.js';

/**
 * The pin journal beside the state file (`<state file>.journal`, NDJSON): the pins changed since
 * the state file (the snapshot) was written, one line per flush, so a flush costs what changed,
 * not every pin held. The first line is the header `{"journal":"<token>"}`; the snapshot names the
 * same token in its `journal` field, so a journal left from an older snapshot is never applied on
 * top of a newer one. Each later line is one flush:
 *
 *     {"release":["replica",…],"set":[["id","replica"],…],"del":["id",…]}
 *
 * applied in that order (every key optional): `release` drops every pin to those replicas (a drain
 * releases them all at once), `set` pins ids, `del` removes them. A line is complete only with its
 * newline: the writer fdatasyncs after the whole line, so a last line without one was never
 * acknowledged (a crash mid-append) and is ignored.
 */

/** What follows the state file's path to name its journal. */
export const JOURNAL_SUFFIX = '.journal';
/** Changed ids a journal line may carry; past it the writer writes a full snapshot instead. */
export const JOURNAL_LINE_MAX_IDS = 50_000;
/** Ids encoded per turn of the event loop. */
const SLICE_IDS = 4_096;

export const journalPathOf = (statePath: string): string => `${statePath}${JOURNAL_SUFFIX}`;

/** A new token for a new snapshot (its journal starts afresh). */
export const newJournalToken = (): string => randomBytes(8).toString('hex');

/** One flush's worth of changes, as the writer took them from the session directory (PinChanges). */
export interface TakenChanges<T> {
  readonly ids: ReadonlySet<string>;
  readonly released: ReadonlySet<T>;
}

/**
 * The journal line (with its newline) recording `changes`, or undefined when there is nothing to
 * record. Each id is recorded as it is now: `set` when `liveReplica` names the replica it is pinned
 * to (one this router records), otherwise `del`. Encoded a slice at a time with a turn of the event
 * loop between slices (measured by `hold`); an id that changes meanwhile is in the next flush's changes,
 * whose line wins.
 */
export async function encodeJournalLine<T>(
  changes: TakenChanges<T>,
  released: (target: T) => string,
  liveReplica: (id: string) => string | undefined,
  hold = new LoopHold(),
): Promise<Buffer | undefined> {
  const rel = [...changes.released].map((t) => JSON.stringify(released(t)));
  const set: string[] = [];
  const del: string[] = [];
  const quoted = new Map<string, string>();
  let n = 0;
  for (const id of changes.ids) {
    const replica = liveReplica(id);
    if (replica === undefined) del.push(JSON.stringify(id));
    else {
      let q = quoted.get(replica);
      if (q === undefined) quoted.set(replica, (q = JSON.stringify(replica)));
      set.push(`[${JSON.stringify(id)},${q}]`);
    }
    if (++n % SLICE_IDS === 0) await hold.turn();
  }
  const parts: string[] = [];
  if (rel.length > 0) parts.push(`"release":[${rel.join(',')}]`);
  if (set.length > 0) parts.push(`"set":[${set.join(',')}]`);
  if (del.length > 0) parts.push(`"del":[${del.join(',')}]`);
  const line = parts.length === 0 ? undefined : Buffer.from(`{${parts.join(',')}}\n`);
  hold.pause();
  return line;
}

/**
 * Replace the journal with a fresh one holding only the header for `token`: a temporary file,
 * fsync, rename, fsync of the directory, so a crash leaves either the old journal or the new one.
 * Resolves to its size in bytes.
 */
export function createJournal(path: string, token: string): Promise<number> {
  return replaceFile(path, (put) => put(Buffer.from(`${JSON.stringify({ journal: token })}\n`)));
}

/**
 * Appends to the journal through one file handle kept open between flushes (two file operations
 * a flush, not four and a path lookup; what bench s measured of the difference: docs/design.md §9).
 * The journal must exist: the handle is opened without O_CREAT, and an append fails once the file
 * was removed (link count 0), so the writer starts a new snapshot and journal.
 */
export class JournalAppender {
  private fh: FileHandle | undefined;

  constructor(readonly path: string) {}

  /** Append one line and fdatasync. */
  async append(line: Uint8Array): Promise<void> {
    this.fh ??= await open(this.path, constants.O_WRONLY | constants.O_APPEND);
    if ((await this.fh.stat()).nlink === 0) throw new Error(`${this.path} was removed`);
    await writeAll(this.fh, line);
    await this.fh.datasync();
  }

  /** Let go of the file (a new journal replaces it, a write failed, or the router stops). */
  async close(): Promise<void> {
    const fh = this.fh;
    this.fh = undefined;
    await fh?.close().catch(() => undefined);
  }
}

/** One append through a handle of its own (tests, tools). */
export async function appendJournal(path: string, line: Uint8Array): Promise<void> {
  const a = new JournalAppender(path);
  try {
    await a.append(line);
  } finally {
    await a.close();
  }
}

/** Something a reader of the journal should tell the operator (the journal was not applied, or not all of it). */
export interface JournalNote {
  readonly level: 'info' | 'warn';
  readonly event: string;
  readonly message: string;
}

export type JournalRead =
  | { readonly kind: 'ok'; readonly state: FleetState; readonly applied: number; readonly note?: JournalNote }
  | { readonly kind: 'invalid'; readonly problems: ConfigProblem[] };

const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const isPairs = (v: unknown): v is Array<[string, string]> =>
  Array.isArray(v) && v.every((p) => Array.isArray(p) && p.length === 2 && typeof p[0] === 'string' && typeof p[1] === 'string');

interface Ops {
  readonly release: readonly string[];
  readonly set: ReadonlyArray<readonly [string, string]>;
  readonly del: readonly string[];
}

/** One line's ops, or what is wrong with it. */
function parseLine(text: string): Ops | string {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return `not valid JSON (${(e as Error).message})`;
  }
  if (!isPlainObject(doc)) return 'must be a JSON object';
  const unknown = Object.keys(doc).filter((k) => k !== 'release' && k !== 'set' && k !== 'del');
  if (unknown.length > 0) return `unknown key ${JSON.stringify(unknown[0])} (expected "release", "set", "del")`;
  const { release = [], set = [], del = [] } = doc;
  if (!isStrings(release)) return '"release" must be a list of replica names';
  if (!isPairs(set)) return '"set" must be a list of ["id", "replica"] pairs';
  if (!isStrings(del)) return '"del" must be a list of ids';
  return { release, set, del };
}

/**
 * `state` with its journal (at `path`) applied to its `sessions`. A journal that is missing, torn
 * in its header, not the snapshot's (another token, or a snapshot that names none) is not applied
 * and says why in `note`; a torn last line is left out with a note. Any other unreadable line is
 * `invalid`, naming `<path>:<line>`, like a corrupt state file.
 */
export function readJournal(path: string, state: FleetState, read: (p: string) => string = (p) => readFileSync(p, 'utf8')): JournalRead {
  let text: string;
  try {
    text = read(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return invalid(`cannot read ${path}: ${(e as Error).message}`);
    if (state.journal === undefined) return { kind: 'ok', state, applied: 0 };
    return {
      kind: 'ok',
      state,
      applied: 0,
      note: { level: 'info', event: 'state_journal_missing', message: `no journal ${path}: the state file alone is used` },
    };
  }
  const lines = text.split('\n');
  // The last element is what follows the last newline: empty, or a line whose append never finished.
  const torn = lines.pop() ?? '';
  const tornNote = (n: number): JournalNote => ({
    level: 'warn',
    event: 'state_journal_torn',
    message: `ignoring the unfinished last line ${path}:${n} (a write cut short by a crash)`,
  });
  if (lines.length === 0) return { kind: 'ok', state, applied: 0, note: torn === '' ? undefined : tornNote(1) };
  let header: unknown;
  try {
    header = JSON.parse(lines[0]);
  } catch {
    header = undefined;
  }
  if (!isPlainObject(header) || typeof header['journal'] !== 'string' || Object.keys(header).length !== 1) {
    return invalid(`${path}:1: the first line must be the header {"journal": "<token>"}`);
  }
  if (header['journal'] !== state.journal) {
    const why =
      state.journal === undefined
        ? 'the state file names no journal'
        : `it belongs to another state file (token ${header['journal']}, the state file's is ${state.journal})`;
    return {
      kind: 'ok',
      state,
      applied: 0,
      note: {
        level: 'warn',
        event: 'state_journal_ignored',
        message: `ignoring the journal ${path}: ${why}; normal after a crash while the state file was rewritten`,
      },
    };
  }
  if (lines.length === 1) return { kind: 'ok', state, applied: 0, note: torn === '' ? undefined : tornNote(2) };
  const pins = new Map<string, string>();
  for (const p of state.sessions) pins.set(p.id, p.replica);
  for (let i = 1; i < lines.length; i++) {
    const ops = parseLine(lines[i]);
    if (typeof ops === 'string') return invalid(`${path}:${i + 1}: ${ops}`);
    if (ops.release.length > 0) {
      const gone = new Set(ops.release);
      for (const [id, replica] of pins) if (gone.has(replica)) pins.delete(id);
    }
    for (const [id, replica] of ops.set) pins.set(id, replica);
    for (const id of ops.del) pins.delete(id);
  }
  const sessions: StatePin[] = [];
  for (const [id, replica] of pins) sessions.push({ id, replica });
  return { kind: 'ok', state: { ...state, sessions }, applied: lines.length - 1, note: torn === '' ? undefined : tornNote(lines.length + 1) };
}

function invalid(message: string): JournalRead {
  return { kind: 'invalid', problems: [{ path: '--state-file', message: `${message}; start with --discard-state to ignore the state` }] };
}
