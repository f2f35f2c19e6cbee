import type { PinPass, PinTarget } from '../affinity/session-directory.js';
import { LoopHold } from './loop-hold.js';

/** Slots looked at per slice before the event loop gets a turn (~0.2 ms of encoding on a 2-core VM). */
export const SLICE_SLOTS = 2_048;
/** Bytes handed to one file write (several slices' worth: a write costs more than a turn). */
export const CHUNK_BYTES = 1024 * 1024;

const PIN_OPEN = Buffer.from('    {"id":"');
const PIN_SEP = Buffer.from(',\n');

/** Copies a few bytes: a plain loop beats `Buffer#copy`'s call overhead at this size. */
function put(b: Buffer, o: number, bytes: Buffer): number {
  for (let i = 0; i < bytes.length; i++) b[o + i] = bytes[i];
  return o + bytes.length;
}

/**
 * Encodes `{"id":…,"replica":…}` lines straight into one reused buffer: no string or object per
 * pin, so a million pins make no garbage. Ids are copied byte for byte when they need no JSON
 * escaping (the router's sanitised ids never do); any other id goes through `JSON.stringify`.
 */
export class PinEncoder {
  private buf: Buffer;
  private off = 0;
  /** Pins encoded so far, over every chunk (all but the first are preceded by a comma). */
  private count = 0;

  constructor(size = CHUNK_BYTES) {
    this.buf = Buffer.allocUnsafeSlow(size);
  }

  /** `","replica":"<name>"}`: the end of every pin of one replica (built once per write). */
  static tail(replica: string): Buffer {
    return Buffer.from(`","replica":${JSON.stringify(replica)}}`);
  }

  get empty(): boolean {
    return this.off === 0;
  }

  /** Appends one pin; false (nothing written) when the chunk has no room left for it. */
  add(id: string, tail: Buffer): boolean {
    // At most 6 bytes per UTF-16 unit once escaped (`\u001f`).
    const need = PIN_SEP.length + PIN_OPEN.length + 6 * id.length + tail.length;
    if (need > this.buf.length - this.off) {
      if (this.off > 0) return false;
      this.buf = Buffer.allocUnsafeSlow(need); // an id longer than a chunk: never one the router made
    }
    const b = this.buf;
    let o = this.off;
    if (this.count > 0) o = put(b, o, PIN_SEP);
    o = put(b, o, PIN_OPEN);
    let plain = true;
    for (let i = 0; i < id.length; i++) {
      const c = id.charCodeAt(i);
      if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) {
        plain = false;
        break;
      }
      b[o + i] = c;
    }
    if (plain) o += id.length;
    else o += b.write(JSON.stringify(id).slice(1, -1), o, 'utf8');
    this.off = put(b, o, tail);
    this.count++;
    return true;
  }

  /** The bytes encoded since the last `take` (valid until the next `add`). */
  take(): Buffer {
    const out = this.buf.subarray(0, this.off);
    this.off = 0;
    return out;
  }
}

/**
 * The `sessions` list of a state file as byte chunks, read from a directory pass (opened when the
 * first chunk is asked for, closed when the last one is taken or the consumer stops) a slice at a time
 * with a turn of the event loop between slices (or a write: the consumer awaits each chunk's write
 * before asking for the next, so one buffer serves every chunk). `replicaOf` names the replica a
 * target's pins are recorded under, or undefined to leave them out (replicas this router does not own).
 * `hold` measures the slices (the stretches between the consumer's writes are the consumer's).
 */
export async function* pinChunks<T extends PinTarget>(
  openPass: () => PinPass<T>,
  now: () => number,
  replicaOf: (target: T) => string | undefined,
  hold = new LoopHold(),
): AsyncGenerator<Buffer> {
  hold.resume();
  const enc = new PinEncoder();
  const tails = new Map<T, Buffer | null>();
  let full = false;
  // Most pins in a row share their target: remember the last one instead of a lookup per pin.
  let last: T | undefined;
  let lastTail: Buffer | null = null;
  const visit = (id: string, target: T): boolean => {
    if (target !== last) {
      let tail = tails.get(target);
      if (tail === undefined) {
        const name = replicaOf(target);
        tail = name === undefined ? null : PinEncoder.tail(name);
        tails.set(target, tail);
      }
      last = target;
      lastTail = tail;
    }
    if (lastTail === null || enc.add(id, lastTail)) return true;
    full = true;
    return false;
  };
  const pass = openPass();
  try {
    while (pass.next(now(), SLICE_SLOTS, visit)) {
      // A full chunk stopped the slice: its write gives the loop its turn; otherwise yield one.
      if (full) {
        full = false;
        yield* handOver(enc.take(), hold);
      } else await hold.turn();
    }
    if (!enc.empty) yield* handOver(enc.take(), hold);
    hold.pause();
  } finally {
    pass.close();
  }
}

/** Yields one chunk: the writer gives up the loop while the consumer writes it. */
function* handOver(chunk: Buffer, hold: LoopHold): Generator<Buffer> {
  hold.pause();
  yield chunk;
  hold.resume();
}
