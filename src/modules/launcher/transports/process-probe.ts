/**
 * Local process liveness and log-tail helpers used by the local transport.
 * Kept apart so the transport file reads as the launch/stop lifecycle only.
 */
import { open, readdir, readFile, readlink } from 'node:fs/promises';

import type { PidIdentity } from '../launcher.transport.js';

function errnoCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = err.code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

/** `kill(target, 0)`: true if it exists (EPERM counts as existing), false on ESRCH. */
function signalZero(target: number): boolean {
  try {
    process.kill(target, 0);
    return true;
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'EPERM') return true;
    if (code === 'ESRCH') return false;
    throw err;
  }
}

/** State letter and process group from the text of /proc/<pid>/stat. */
function parseStat(stat: string): { state: string; pgrp: number } {
  // "pid (comm) state ppid pgrp ..." — comm may contain spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0] ?? '', pgrp: Number(fields[2]) };
}

async function procState(pid: number): Promise<string | undefined> {
  try {
    return parseStat(await readFile(`/proc/${pid}/stat`, 'utf8')).state;
  } catch {
    return undefined;
  }
}

/**
 * On Linux, whether some member of process group `pgid` (or the process `pid`) is not a zombie.
 * Orphaned members of a killed group are reparented to init; an init that reaps lazily (or a
 * container whose PID 1 never reaps) leaves zombies that `kill(-pgid, 0)` still reports.
 * Returns undefined when /proc cannot answer (other platforms), so the caller trusts kill().
 */
async function hasLiveMemberViaProc(pgid: number): Promise<boolean | undefined> {
  if (process.platform !== 'linux') return undefined;
  const leader = await procState(pgid);
  if (leader !== undefined && leader !== 'Z' && leader !== 'X') return true; // the common case
  try {
    for await (const _ of liveGroupMembers(pgid)) return true;
  } catch {
    return undefined;
  }
  return false;
}

/**
 * The live (not zombie) processes of group `pgid`, and `pgid` itself if it is live, from /proc,
 * lazily (a caller may stop at the first). Throws when /proc cannot be listed.
 */
async function* liveGroupMembers(pgid: number): AsyncGenerator<number> {
  for (const entry of await readdir('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = await readFile(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    const { state, pgrp } = parseStat(stat);
    if ((pgrp === pgid || Number(entry) === pgid) && state !== 'Z' && state !== 'X') yield Number(entry);
  }
}

/**
 * True while the process group led by `pid` exists, falling back to the pid alone
 * (ESRCH → gone, EPERM → exists); zombies do not count as alive on Linux.
 */
export async function isProcessGroupAlive(pid: number): Promise<boolean> {
  if (!signalZero(-pid) && !signalZero(pid)) return false;
  const live = await hasLiveMemberViaProc(pid);
  return live ?? true;
}

/** Send `signal` to the group led by `pid`, else to the pid; false when neither exists. */
export function signalGroup(pid: number, signal: NodeJS.Signals): boolean {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, signal);
      return true;
    } catch (err) {
      if (errnoCode(err) !== 'ESRCH') throw err;
    }
  }
  return false;
}

/**
 * Inodes of the sockets listening on `port` (any address, IPv4 or IPv6) in this network
 * namespace, from /proc/net/tcp{,6}; undefined when neither file can be read (no procfs).
 */
async function listeningInodes(port: number): Promise<Set<string> | undefined> {
  const inodes = new Set<string>();
  let readable = false;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch {
      continue;
    }
    readable = true;
    // "sl local_address rem_address st ... inode": local_address is HEXADDR:HEXPORT, st 0A = LISTEN.
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      const local = f[1];
      if (local === undefined || f[3] !== '0A' || f[9] === undefined) continue;
      if (Number.parseInt(local.slice(local.lastIndexOf(':') + 1), 16) === port) inodes.add(f[9]);
    }
  }
  return readable ? inodes : undefined;
}

/** True when one of `pid`'s open descriptors is one of the sockets `inodes`. */
async function holdsSocket(pid: number, inodes: ReadonlySet<string>): Promise<boolean> {
  let fds: string[];
  try {
    fds = await readdir(`/proc/${pid}/fd`);
  } catch {
    return false; // gone, or not ours to inspect
  }
  for (const fd of fds) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    const m = /^socket:\[(\d+)\]$/.exec(target);
    if (m !== null && inodes.has(m[1])) return true;
  }
  return false;
}

/**
 * Prove that `pid` is the replica serving `port` on this machine: it is alive and it, or a live
 * member of the process group it leads (a launch wrapper's child), holds the listening socket.
 * Linux only (it reads /proc); elsewhere the identity counts as unproven.
 */
export async function identifyListener(pid: number, port: number): Promise<PidIdentity> {
  if (!(await isProcessGroupAlive(pid))) return { proven: false, reason: `pid ${pid} is not alive` };
  const inodes = process.platform === 'linux' ? await listeningInodes(port) : undefined;
  if (inodes === undefined) return { proven: false, reason: `cannot inspect sockets without /proc (platform ${process.platform})` };
  if (inodes.size === 0) return { proven: false, reason: `no socket listens on port ${port} on this machine` };
  if (await holdsSocket(pid, inodes)) return { proven: true };
  try {
    for await (const member of liveGroupMembers(pid)) if (member !== pid && (await holdsSocket(member, inodes))) return { proven: true };
  } catch {
    // /proc cannot be listed: unproven
  }
  return { proven: false, reason: `neither pid ${pid} nor its process group holds the socket listening on port ${port}` };
}

const TAIL_CHUNK = 64 * 1024;
const TAIL_MAX_BYTES = 16 * 1024 * 1024;

/**
 * The last `lines` lines of a file, reading backwards from its end in 64 KiB chunks (never the
 * whole file; at most 16 MiB). A missing file yields []. A trailing newline does not count as
 * an empty last line.
 */
export async function tailFile(path: string, lines: number): Promise<string[]> {
  if (lines <= 0) return [];
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return [];
    throw err;
  }
  try {
    const size = (await handle.stat()).size;
    const chunks: Buffer[] = [];
    let position = size;
    let newlines = 0;
    let read = 0;
    // One newline more than wanted marks the start of the first kept line (+1 for a trailing one).
    while (position > 0 && newlines <= lines && read < TAIL_MAX_BYTES) {
      const length = Math.min(TAIL_CHUNK, position);
      position -= length;
      const buf = Buffer.alloc(length);
      const { bytesRead } = await handle.read(buf, 0, length, position);
      const chunk = buf.subarray(0, bytesRead);
      chunks.unshift(chunk);
      read += bytesRead;
      for (const byte of chunk) if (byte === 0x0a) newlines++;
    }
    const text = Buffer.concat(chunks).toString('utf8');
    const all = text.split('\n');
    if (all.at(-1) === '') all.pop();
    // The first line is partial when we did not reach the start of the file.
    if (position > 0) all.shift();
    return all.slice(-lines);
  } finally {
    await handle.close();
  }
}
