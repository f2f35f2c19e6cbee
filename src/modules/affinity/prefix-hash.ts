/**
 * The prompt prefix of a session-less request as a chain of block hashes (contract §4.1), no tokenizer.
 *
 * The prompt text is cut into segments (each chat message with its role, each completions prompt
 * string) and each segment into blocks of at most `PREFIX_BLOCK_CHARS` UTF-16 units; a segment's
 * last block may be short. Block i's hash continues from block i − 1's state, so it names the whole
 * prefix up to it: two requests share block i's hash only if they share everything before it (up to
 * a 53-bit collision). Segment ends are block ends, so a conversation re-sent with a new turn
 * appended produces the same hashes for every earlier message, short ones included. A completions
 * `prompt` that grows in place shares only its full blocks with the previous turn.
 *
 * Two 32-bit multiplicative lanes (FNV-1a-style, different primes), finalised per block with
 * murmur3's fmix32 and combined into one 53-bit integer: exact as a JS number, a cheap Map key.
 * Markers above 0xFFFF (no UTF-16 unit has them) separate role, content and parts, so no text can
 * forge a boundary.
 */

/** Characters per block (128 in vllm production-stack's prefix trie; 256 here halves the index). */
export const PREFIX_BLOCK_CHARS = 256;
/** Bodies above this are routed without prefix affinity: parsing them would cost more than it saves. */
export const PREFIX_MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Blocks hashed at most per request (256 chars each: the first 2 MiB of text). */
export const PREFIX_MAX_BLOCKS = 8192;

const ROLE = 0x10001;
const CONTENT = 0x10002;
const PART = 0x10003;
const OTHER_PART = 0x10004;
const PROMPT = 0x10005;
const MODEL = 0x10006;
/** A value that is not a string (null, a number, an object, tool calls, a token array): its JSON text follows. */
const VALUE = 0x10007;

function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** Accumulates block hashes; `a`/`b` are the running lanes, `fill` the units in the open block. */
class ChainBuilder {
  readonly hashes: number[] = [];
  // Lanes stay int32 (`| 0`), never a heap number, so the per-character loop runs on machine words.
  private a = 0x811c9dc5 | 0;
  private b = 0x2f0d1a3b | 0;
  private fill = 0;

  constructor(
    private readonly blockChars: number,
    private readonly maxBlocks: number,
  ) {}

  get full(): boolean {
    return this.hashes.length >= this.maxBlocks;
  }

  /** Mix one unit (a UTF-16 code unit or a marker) into the open block. */
  unit(c: number): void {
    this.a = Math.imul(this.a ^ c, 0x01000193);
    this.b = Math.imul(this.b ^ c, 0x5bd1e995);
  }

  text(s: string): void {
    const n = s.length;
    let i = 0;
    while (i < n && !this.full) {
      const end = i + Math.min(n - i, this.blockChars - this.fill);
      let a = this.a;
      let b = this.b;
      this.fill += end - i;
      for (; i < end; i++) {
        const c = s.charCodeAt(i);
        a = Math.imul(a ^ c, 0x01000193);
        b = Math.imul(b ^ c, 0x5bd1e995);
      }
      this.a = a;
      this.b = b;
      if (this.fill === this.blockChars) this.close();
    }
  }

  /** Close the open block (a segment ended, or the block is full); the chain goes on from it. */
  close(): void {
    if (this.full) return;
    const hi = fmix32(this.a ^ Math.imul(this.b, 0x9e3779b1));
    const lo = fmix32(this.b ^ hi);
    this.a = hi;
    this.b = lo;
    this.fill = 0;
    // 32 bits of `hi` and the top 21 of `lo`: a non-negative safe integer.
    this.hashes.push((hi >>> 0) * 0x200000 + (lo >>> 11));
  }
}

type Json = unknown;

function isRecord(v: Json): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Roles that set up a conversation rather than start it (a shared system prompt is not a conversation). */
const PREAMBLE_ROLES = new Set(['system', 'developer']);

/**
 * A prompt's block hashes, and how many of them a match must cover to be useful: up to the end of
 * the first message that is not a system prompt (the conversation's first turn), 1 for a completions
 * prompt. Two chats sharing only a system prompt are two conversations (shared system prompts are
 * issue 15 item 2: placing new conversations where their preamble is cached).
 */
export interface PromptChain {
  readonly blocks: readonly number[];
  readonly minMatch: number;
}

const EMPTY: PromptChain = { blocks: [], minMatch: 1 };

/** A value as the engine sees it: a string as text, anything else as its JSON text behind a marker (so `1`, `"1"` and `null` differ). */
function value(v: Json, out: ChainBuilder): void {
  if (typeof v === 'string') return out.text(v);
  if (v === undefined) return;
  out.unit(VALUE);
  out.text(JSON.stringify(v));
}

/**
 * One chat message: role, then the string content or each part in order (a text part's text; any
 * other part, an image URL or data, audio, as its JSON text, so two images differ), then its tool
 * calls when it has them.
 */
function message(m: Json, out: ChainBuilder): boolean {
  if (!isRecord(m)) return false;
  out.unit(ROLE);
  value(m.role, out);
  out.unit(CONTENT);
  const content = m.content;
  if (Array.isArray(content)) {
    for (const part of content) {
      if (isRecord(part) && typeof part.text === 'string') {
        out.unit(PART);
        out.text(part.text);
      } else {
        out.unit(OTHER_PART);
        value(part, out);
      }
    }
  } else {
    value(content, out);
  }
  if (m.tool_calls !== undefined) value(m.tool_calls, out);
  out.close();
  return typeof m.role !== 'string' || !PREAMBLE_ROLES.has(m.role);
}

/**
 * The block-hash chain of an OpenAI chat (`messages`) or completions (`prompt`) body, already
 * parsed; empty when it has neither (or only token arrays). The model name seeds the chain, so the
 * same prompt to two models is two prefixes.
 */
export function promptChain(body: Json, blockChars = PREFIX_BLOCK_CHARS, maxBlocks = PREFIX_MAX_BLOCKS): PromptChain {
  if (!isRecord(body)) return EMPTY;
  const out = new ChainBuilder(blockChars, maxBlocks);
  out.unit(MODEL);
  if (typeof body.model === 'string') out.text(body.model);
  const seeded = out.hashes.length;
  let firstTurn = 0;
  if (Array.isArray(body.messages)) {
    for (const m of body.messages) {
      if (out.full) break;
      if (message(m, out) && firstTurn === 0) firstTurn = out.hashes.length - seeded;
    }
    if (firstTurn === 0) firstTurn = out.hashes.length - seeded;
  } else if (typeof body.prompt === 'string' || Array.isArray(body.prompt)) {
    // One prompt: a string, or one array of token ids; else a list of prompts (strings or token arrays).
    const one = typeof body.prompt === 'string' || (body.prompt as Json[]).every((t) => typeof t === 'number');
    const prompts: Json[] = one ? [body.prompt] : (body.prompt as Json[]);
    for (const p of prompts) {
      if (out.full) break;
      out.unit(PROMPT);
      value(p, out);
      out.close();
    }
  }
  // A model name longer than a block closed blocks of its own: they are no prompt.
  const blocks = seeded === 0 ? out.hashes : out.hashes.slice(seeded);
  return blocks.length === 0 ? EMPTY : { blocks, minMatch: Math.max(1, firstTurn) };
}

/**
 * The chain of a raw request body, or an empty one when it is too large, not JSON, or has no
 * prompt. The only JSON.parse of a whole body in the router, and only for session-less requests.
 */
export function bodyPromptChain(body: Buffer, maxBytes = PREFIX_MAX_BODY_BYTES): PromptChain {
  if (body.length === 0 || body.length > maxBytes) return EMPTY;
  let doc: Json;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    return EMPTY;
  }
  return promptChain(doc);
}
