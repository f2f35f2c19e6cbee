/**
 * Request bodies of the overhead scenarios (a, b, c): ~1 KB chat completions carrying a
 * `session_id` body field, rotated over a fixed set of sessions, deterministic from a seed.
 */
import { seededRandom } from './stats.js';

/** The chat completions path every scenario posts to. */
export const CHAT_PATH = '/v1/chat/completions';

/** A 32-lowercase-hex id from `random` (the shape of the router's minted ids). */
export function hexId(random: () => number): string {
  let s = '';
  for (let i = 0; i < 4; i++)
    s += Math.floor(random() * 0x1_0000_0000)
      .toString(16)
      .padStart(8, '0');
  return s;
}

const FILLER =
  'Please summarise the following notes about the deployment of the serving fleet and list the open risks. ' +
  'The replicas run behind a session-affinity router; each conversation should stay on the replica that holds its cache. ';

/**
 * `sessions` non-streaming chat bodies of about `bytes` bytes each (one per session). The
 * `session_id` field comes last, as SDKs that merge `extra_body` put it, so the router's peek
 * scans the whole body.
 */
export function chatBodies(sessions = 500, bytes = 1024, seed = 1): string[] {
  const random = seededRandom(seed);
  const out: string[] = [];
  for (let i = 0; i < sessions; i++) {
    const id = hexId(random);
    const make = (content: string): string =>
      JSON.stringify({
        model: 'sim-model',
        max_tokens: 16,
        messages: [
          { role: 'system', content: 'You are a concise assistant.' },
          { role: 'user', content },
        ],
        session_id: id,
      });
    const base = make('');
    let content = '';
    while (Buffer.byteLength(base) + content.length < bytes) content += FILLER;
    out.push(make(content.slice(0, Math.max(0, bytes - Buffer.byteLength(base)))));
  }
  return out;
}

/** A streaming chat body asking for exactly `tokens` tokens, with its own session id. */
export function streamBody(tokens: number, sessionId: string): string {
  return JSON.stringify({
    model: 'sim-model',
    stream: true,
    max_tokens: tokens,
    messages: [{ role: 'user', content: 'Count slowly, one word per chunk.' }],
    session_id: sessionId,
  });
}
