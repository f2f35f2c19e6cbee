/**
 * The multi-turn chat workload of scenario (e). Deterministic from a seed, so every routing
 * policy gets the same offered sequence:
 *  - arrivals: a Poisson process at `rate` requests/s for `durationS`;
 *  - `activeSessions` conversations are in progress at any time; each arrival is the next turn
 *    of a conversation drawn at random from them; after `turns` turns a conversation is replaced
 *    by a new one (so a run sees a few hundred sessions);
 *  - a conversation's prompt is a shared preamble + its own long system prompt, then every earlier
 *    user message and answer, then the new user message: a growing shared prefix per session.
 * Text is made of pseudo-words, because the simulator's "tokens" are whitespace-separated words.
 */
import { exponential, seededRandom } from './stats.js';
import { hexId } from './workload.js';

/** Sizes of the workload (in simulator tokens = words). */
export interface ChatWorkloadSpec {
  seed: number;
  /** Offered requests per second. */
  rate: number;
  durationS: number;
  activeSessions: number;
  turns: number;
  preambleWords: number;
  systemWords: number;
  userWords: number;
  /** `max_tokens` of every request (the answer the simulator generates). */
  answerTokens: number;
}

/** The sizes scenario (e) uses. */
export function defaultChatWorkload(rate: number, durationS: number): ChatWorkloadSpec {
  return { seed: 42, rate, durationS, activeSessions: 60, turns: 6, preambleWords: 64, systemWords: 320, userWords: 40, answerTokens: 24 };
}

/** One scheduled request: turn `turn` of conversation `session`, due `atMs` after the start. */
export interface PlannedTurn {
  atMs: number;
  session: number;
  turn: number;
}

/** A chat message as sent. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

function words(random: () => number, n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(`w${Math.floor(random() * 50_000).toString(36)}`);
  return out.join(' ');
}

/** The arrival schedule and session assignment (independent of how fast anything answers); `sessions` = distinct conversations used. */
export function planChat(spec: ChatWorkloadSpec): { turns: PlannedTurn[]; sessions: number } {
  const random = seededRandom(spec.seed);
  const pool = Array.from({ length: spec.activeSessions }, (_, i) => i);
  const done = new Map<number, number>();
  let nextSession = spec.activeSessions;
  const turns: PlannedTurn[] = [];
  let at = 0;
  for (;;) {
    at += exponential(random, 1000 / spec.rate);
    if (at >= spec.durationS * 1000) break;
    const slot = Math.floor(random() * pool.length);
    const session = pool[slot] ?? 0;
    const turn = done.get(session) ?? 0;
    turns.push({ atMs: at, session, turn });
    done.set(session, turn + 1);
    if (turn + 1 >= spec.turns) pool[slot] = nextSession++;
  }
  return { turns, sessions: new Set(turns.map((t) => t.session)).size };
}

/** One conversation's state: its id, fixed system prompt and history so far. */
export class Conversation {
  readonly id: string;
  readonly messages: ChatMessage[];
  /** The previous turn's exchange; the next turn waits for it (a client answers in order). */
  last: Promise<void> = Promise.resolve();

  constructor(
    private readonly spec: ChatWorkloadSpec,
    readonly index: number,
    preamble: string,
  ) {
    const random = seededRandom(spec.seed * 1_000_003 + index);
    this.id = hexId(random);
    this.messages = [{ role: 'system', content: `${preamble} ${words(random, spec.systemWords)}` }];
  }

  /** The body of turn `turn` (appends the user message to the history). */
  nextBody(turn: number): string {
    const random = seededRandom(this.spec.seed * 7_919 + this.index * 131 + turn);
    this.messages.push({ role: 'user', content: words(random, this.spec.userWords) });
    return JSON.stringify({ model: 'sim-model', max_tokens: this.spec.answerTokens, messages: this.messages, session_id: this.id });
  }

  /** Appends the assistant's answer (the text the replica returned). */
  answered(content: string): void {
    this.messages.push({ role: 'assistant', content });
  }
}

/** The preamble every conversation's system prompt starts with. */
export function sharedPreamble(spec: ChatWorkloadSpec): string {
  return words(seededRandom(spec.seed ^ 0x5eed), spec.preambleWords);
}

/** The assistant text in a chat completion body, or '' when it has none. */
export function answerText(body: Buffer): string {
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    if (typeof parsed !== 'object' || parsed === null || !('choices' in parsed) || !Array.isArray(parsed.choices)) return '';
    const first: unknown = parsed.choices[0];
    if (typeof first !== 'object' || first === null || !('message' in first)) return '';
    const message: unknown = first.message;
    if (typeof message !== 'object' || message === null || !('content' in message)) return '';
    return typeof message.content === 'string' ? message.content : '';
  } catch {
    return '';
  }
}
