/**
 * The workload of scenario (x), issue 15: `conversations` multi-turn chats of `turns` turns each,
 * with long system prompts, sent with or without session ids. Deterministic from a seed:
 *  - arrivals: a Poisson process at `rate` requests/s; each arrival is the next turn of one of the
 *    `active` conversations in progress (drawn at random); a finished conversation is replaced by
 *    the next new one until all have started;
 *  - system prompts: one per conversation (`shared` 0), or `shared` prompts that conversation i
 *    uses number i mod `shared` of (many sessions of a few apps);
 *  - every turn re-sends the whole history, as the OpenAI SDKs do.
 * Also the oracle: the hit rate of one infinite KV cache fed every prompt in send order.
 */
import { KvCacheModel, tokenize } from '../src/sim/kv-cache.js';
import { promptText } from '../src/sim/sim-openai.js';
import { exponential, seededRandom } from './stats.js';
import { hexId } from './workload.js';

export interface PrefixWorkloadSpec {
  seed: number;
  rate: number;
  conversations: number;
  turns: number;
  active: number;
  systemWords: number;
  /** 0: a system prompt per conversation; n: n prompts shared round the conversations. */
  shared: number;
  userWords: number;
  answerTokens: number;
}

/** One scheduled request: turn `turn` of conversation `conv`, due `atMs` after the start. */
export interface PrefixTurn {
  atMs: number;
  conv: number;
  turn: number;
}

function words(random: () => number, n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(`w${Math.floor(random() * 50_000).toString(36)}`);
  return out.join(' ');
}

/** Every turn of every conversation, in send order. */
export function planPrefixTurns(spec: PrefixWorkloadSpec): PrefixTurn[] {
  const random = seededRandom(spec.seed);
  const pool = Array.from({ length: Math.min(spec.active, spec.conversations) }, (_, i) => i);
  let next = pool.length;
  const done = new Map<number, number>();
  const out: PrefixTurn[] = [];
  let at = 0;
  while (pool.length > 0) {
    at += exponential(random, 1000 / spec.rate);
    const slot = Math.floor(random() * pool.length);
    const conv = pool[slot] ?? 0;
    const turn = done.get(conv) ?? 0;
    out.push({ atMs: at, conv, turn });
    done.set(conv, turn + 1);
    if (turn + 1 < spec.turns) continue;
    if (next < spec.conversations) pool[slot] = next++;
    else pool.splice(slot, 1);
  }
  return out;
}

/** The system prompts of a workload: `shared` of them, or one per conversation. */
export function systemPrompts(spec: PrefixWorkloadSpec): string[] {
  const n = spec.shared > 0 ? spec.shared : spec.conversations;
  return Array.from({ length: n }, (_, i) => words(seededRandom(spec.seed * 31 + i + 1), spec.systemWords));
}

/** One conversation: its history so far, and the previous turn (the next waits for it). */
export class PrefixConversation {
  readonly id: string;
  readonly messages: Array<{ role: string; content: string }>;
  last: Promise<void> = Promise.resolve();

  constructor(
    private readonly spec: PrefixWorkloadSpec,
    readonly index: number,
    system: string,
    private readonly sessionIds: boolean,
  ) {
    this.id = hexId(seededRandom(spec.seed * 1_000_003 + index));
    this.messages = [{ role: 'system', content: system }];
  }

  nextBody(turn: number): string {
    const random = seededRandom(this.spec.seed * 7_919 + this.index * 131 + turn);
    this.messages.push({ role: 'user', content: words(random, this.spec.userWords) });
    const body: Record<string, unknown> = { model: 'sim-model', max_tokens: this.spec.answerTokens, messages: this.messages };
    if (this.sessionIds) body['session_id'] = this.id;
    return JSON.stringify(body);
  }

  answered(content: string): void {
    this.messages.push({ role: 'assistant', content });
  }
}

/** Hit rate of one KV cache that never evicts, fed `bodies` in order: no routing can do better. */
export function oracleHitRate(bodies: readonly string[], blockSize: number): number {
  const cache = new KvCacheModel(blockSize, Number.MAX_SAFE_INTEGER);
  let prompt = 0;
  let cached = 0;
  for (const b of bodies) {
    const r = cache.admit(tokenize(promptText('chat', JSON.parse(b) as Record<string, unknown>)));
    prompt += r.promptTokens;
    cached += r.cachedTokens;
  }
  return prompt === 0 ? 0 : cached / prompt;
}
