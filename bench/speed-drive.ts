/**
 * The client side of scenario (v): the multi-turn chat workload of chat-workload.ts (scenario e),
 * sent as streams so that the client sees each request's time to first token, with the prompt of
 * every request kept for the oracle hit rate (one infinite KV cache fed every prompt in send order).
 */
import http from 'node:http';
import { Conversation, planChat, sharedPreamble, type ChatWorkloadSpec } from './chat-workload.js';
import { fireOnSchedule, loadAgent } from './open-loop.js';
import { CHAT_PATH } from './workload.js';

/** One streamed exchange as the client saw it. */
export interface StreamedTurn {
  status: number;
  /** Request sent → first token event (ms); NaN when none arrived. */
  ttftMs: number;
  /** The replica that answered (the simulator's X-Replica-Name). */
  replica: string;
  /** The router's X-Router-Affinity. */
  decision: string;
  text: string;
}

/** POSTs a streaming chat request and reads the SSE answer, stamping the first token. */
export function postStream(agent: http.Agent, url: URL, body: string, timeoutMs = 120_000): Promise<StreamedTurn> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        let buf = '';
        let text = '';
        let ttftMs = NaN;
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          buf += c;
          let sep: number;
          while ((sep = buf.indexOf('\n\n')) >= 0) {
            const event = buf.slice(0, sep);
            buf = buf.slice(sep + 2);
            if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
            const content = deltaContent(event.slice(6));
            if (content === undefined) continue;
            if (Number.isNaN(ttftMs)) ttftMs = performance.now() - t0;
            text += content;
          }
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            ttftMs,
            replica: String(res.headers['x-replica-name'] ?? ''),
            decision: String(res.headers['x-router-affinity'] ?? ''),
            text,
          }),
        );
        res.on('error', reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${url.href}: no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

function deltaContent(json: string): string | undefined {
  try {
    const parsed = JSON.parse(json) as { choices?: Array<{ delta?: { content?: unknown } }> };
    const content = parsed.choices?.[0]?.delta?.content;
    return typeof content === 'string' ? content : undefined;
  } catch {
    return undefined;
  }
}

/** What one run of the workload measured on the client. */
export interface SpeedDriven {
  sent: number;
  ok: number;
  failed: number;
  ttfts: number[];
  /** TTFT samples by replica and by whether the turn was the conversation's first. */
  ttftsBy: Record<string, number[]>;
  /** Requests per replica (by the simulator's own header). */
  perReplica: Record<string, number>;
  decisions: Record<string, number>;
  /** Every request body, in send order (for the oracle). */
  bodies: string[];
}

/** Plays the workload against `base` (Poisson arrivals; a conversation's turns in order). */
export async function driveStreams(base: string, spec: ChatWorkloadSpec): Promise<SpeedDriven> {
  const { turns } = planChat(spec);
  const preamble = sharedPreamble(spec);
  const conversations = new Map<number, Conversation>();
  const agent = loadAgent();
  const url = new URL(CHAT_PATH, base);
  const out: SpeedDriven = { sent: turns.length, ok: 0, failed: 0, ttfts: [], ttftsBy: {}, perReplica: {}, decisions: {}, bodies: [] };
  const t0 = performance.now() + 50;
  const fire = (i: number): void => {
    const p = turns[i];
    if (p === undefined) return;
    let conv = conversations.get(p.session);
    if (conv === undefined) {
      conv = new Conversation(spec, p.session, preamble);
      conversations.set(p.session, conv);
    }
    const c = conv;
    c.last = c.last.then(async () => {
      const body = streamed(c.nextBody(p.turn));
      out.bodies.push(body);
      try {
        const r = await postStream(agent, url, body);
        if (r.status === 200 && !Number.isNaN(r.ttftMs)) {
          out.ok++;
          out.ttfts.push(r.ttftMs);
          (out.ttftsBy[`${r.replica} ${p.turn === 0 ? 'first' : 'later'}`] ??= []).push(r.ttftMs);
          out.perReplica[r.replica] = (out.perReplica[r.replica] ?? 0) + 1;
          out.decisions[r.decision] = (out.decisions[r.decision] ?? 0) + 1;
        } else out.failed++;
        c.answered(r.text);
      } catch {
        out.failed++;
        c.answered('');
      }
    });
  };
  await fireOnSchedule(turns, t0, fire);
  await Promise.all([...conversations.values()].map((c) => c.last));
  agent.destroy();
  return out;
}

/** The same body with `"stream": true`. */
function streamed(body: string): string {
  return `${body.slice(0, -1)},"stream":true}`;
}
