/**
 * OpenAI/vLLM request reading and response shapes for the simulator: completion bodies, SSE
 * chunks, usage, `/v1/models` and the `{"object":"error",...}` error body.
 */
import { randomUUID } from 'node:crypto';

/** Which completion API a request used. */
export type CompletionKind = 'chat' | 'completion';

/** Token counts reported in `usage` (vLLM adds `prompt_tokens_details.cached_tokens`). */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

/** Everything the response builders need about one completion. */
export interface CompletionMeta {
  readonly kind: CompletionKind;
  readonly id: string;
  readonly created: number;
  readonly model: string;
}

const WORDS = ['The', 'quick', 'brown', 'fox', 'jumps', 'over', 'the', 'lazy', 'dog.'];

/** Output token `i` as text: words cycling through a pangram, space-separated. */
export function outputToken(i: number): string {
  const word = WORDS[i % WORDS.length] ?? 'sim';
  return i === 0 ? word : ` ${word}`;
}

/** A fresh completion id/timestamp for a request of `kind`. */
export function newCompletionMeta(kind: CompletionKind, model: string): CompletionMeta {
  const prefix = kind === 'chat' ? 'chatcmpl-' : 'cmpl-';
  return {
    kind,
    id: prefix + randomUUID().replaceAll('-', ''),
    created: Math.floor(Date.now() / 1000),
    model,
  };
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const parts: string[] = [];
  for (const part of content as unknown[]) {
    if (typeof part === 'string') parts.push(part);
    else if (typeof part === 'object' && part !== null && 'text' in part) {
      const text: unknown = part.text;
      if (typeof text === 'string') parts.push(text);
    }
  }
  return parts.join(' ');
}

/**
 * The prompt text the KV model tokenizes. Chat: every message's role then its content (string,
 * or the text parts of a content array), in order. Completions: `prompt` (a string, or an array
 * of strings / token ids joined by spaces). A missing or odd-shaped field is an empty prompt
 * (the simulator is lenient; it is not a validator).
 */
export function promptText(kind: CompletionKind, body: Record<string, unknown>): string {
  if (kind === 'completion') {
    const prompt = body.prompt;
    if (typeof prompt === 'string') return prompt;
    if (Array.isArray(prompt)) return prompt.map((p) => (Array.isArray(p) ? p.join(' ') : String(p))).join(' ');
    return '';
  }
  const messages = body.messages;
  if (!Array.isArray(messages)) return '';
  const parts: string[] = [];
  for (const message of messages as unknown[]) {
    if (typeof message !== 'object' || message === null) continue;
    const role: unknown = 'role' in message ? message.role : undefined;
    if (typeof role === 'string') parts.push(role);
    parts.push(textOf('content' in message ? message.content : undefined));
  }
  return parts.join(' ');
}

/**
 * Completion length: `max_completion_tokens`, else `max_tokens` (positive integers), else
 * `fallback`. `explicit` tells whether the client set the limit (finish_reason `length`).
 */
export function requestedOutputTokens(body: Record<string, unknown>, fallback: number): { count: number; explicit: boolean } {
  for (const key of ['max_completion_tokens', 'max_tokens']) {
    const value = body[key];
    if (typeof value === 'number' && Number.isInteger(value) && value >= 1) {
      return { count: value, explicit: true };
    }
  }
  return { count: fallback, explicit: false };
}

/** `"stream": true` in the body. */
export function wantsStream(body: Record<string, unknown>): boolean {
  return body.stream === true;
}

/** `stream_options.include_usage` is true. */
export function wantsStreamUsage(body: Record<string, unknown>): boolean {
  const options = body.stream_options;
  return typeof options === 'object' && options !== null && 'include_usage' in options && options.include_usage === true;
}

/** Builds `usage` for a completion. */
export function usageOf(promptTokens: number, cachedTokens: number, completionTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

/** The non-stream response body (`chat.completion` or `text_completion`). */
export function completionBody(meta: CompletionMeta, text: string, finishReason: string, usage: Usage): string {
  const choice =
    meta.kind === 'chat'
      ? { index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: finishReason }
      : { index: 0, text, logprobs: null, finish_reason: finishReason };
  const object = meta.kind === 'chat' ? 'chat.completion' : 'text_completion';
  return JSON.stringify({ id: meta.id, object, created: meta.created, model: meta.model, choices: [choice], usage });
}

function sse(payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

function chunk(meta: CompletionMeta, choice: Record<string, unknown>): string {
  const object = meta.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  return sse({ id: meta.id, object, created: meta.created, model: meta.model, choices: [choice] });
}

/** SSE event carrying output token `i` (chat: the first one also carries `delta.role`). */
export function tokenChunk(meta: CompletionMeta, i: number): string {
  const text = outputToken(i);
  if (meta.kind === 'completion') return chunk(meta, { index: 0, text, logprobs: null, finish_reason: null });
  const delta = i === 0 ? { role: 'assistant', content: text } : { content: text };
  return chunk(meta, { index: 0, delta, logprobs: null, finish_reason: null });
}

/** SSE event closing the choice with `finish_reason`. */
export function finishChunk(meta: CompletionMeta, finishReason: string, isFirst: boolean): string {
  if (meta.kind === 'completion') return chunk(meta, { index: 0, text: '', logprobs: null, finish_reason: finishReason });
  const delta = isFirst ? { role: 'assistant', content: '' } : {};
  return chunk(meta, { index: 0, delta, logprobs: null, finish_reason: finishReason });
}

/** SSE event with `choices: []` and `usage` (sent when `stream_options.include_usage`). */
export function usageChunk(meta: CompletionMeta, usage: Usage): string {
  const object = meta.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  return sse({ id: meta.id, object, created: meta.created, model: meta.model, choices: [], usage });
}

/** The SSE terminator. */
export const DONE_EVENT = 'data: [DONE]\n\n';

/** `GET /v1/models` body: the model, then each LoRA adapter with its `parent`, as vLLM lists them. */
export function modelsBody(model: string, created: number, loras: readonly string[] = []): string {
  const card = (id: string, parent: string | null): object => ({ id, object: 'model', created, owned_by: 'sim', root: id, parent });
  return JSON.stringify({ object: 'list', data: [card(model, null), ...loras.map((l) => card(l, model))] });
}

/** Adapters in a `huge` model list: ~57 MB, as one engine with every adapter of a hub listed. */
const HUGE_LIST_ADAPTERS = 300_000;

/** `GET /v1/models` as the `models_list` switch says: the real list, bytes that are not JSON, or a ~57 MB list. */
export function modelsAnswer(kind: 'ok' | 'garbage' | 'huge', model: string, created: number, loras: readonly string[]): string {
  if (kind === 'garbage') return '<html>this is not a model list';
  if (kind === 'ok') return modelsBody(model, created, loras);
  const many = Array.from({ length: HUGE_LIST_ADAPTERS }, (_, i) => `adapter-${String(i).padStart(7, '0')}-${'x'.repeat(40)}`);
  return modelsBody(model, created, many);
}

/**
 * Why a completion body is refused before any work, or undefined: not a JSON object (400), or a
 * string `model` that is neither the served model nor one of its LoRA adapters (404
 * `model_not_found`, as vLLM refuses it). A body without `model` is served by the base model.
 */
export function refuseCompletionBody(parsed: unknown, model: string, loras: readonly string[]): { status: number; body: string } | undefined {
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    return { status: 400, body: errorBody(400, 'request body must be a JSON object') };
  const asked = (parsed as { model?: unknown }).model;
  if (typeof asked !== 'string' || asked === model || loras.includes(asked)) return undefined;
  const message = `The model \`${asked}\` does not exist.`;
  return { status: 404, body: JSON.stringify({ object: 'error', message, type: 'invalid_request_error', param: 'model', code: 'model_not_found' }) };
}

/** The error `type` vLLM/OpenAI clients expect for a status. */
export function errorTypeFor(status: number): string {
  if (status === 502) return 'bad_gateway';
  if (status === 503) return 'service_unavailable';
  if (status === 504) return 'timeout';
  if (status >= 500) return 'internal_server_error';
  if (status === 404) return 'not_found_error';
  return 'invalid_request_error';
}

/** `{"object":"error","message","type","code"}` with `code` = the HTTP status (as vLLM). */
export function errorBody(status: number, message: string): string {
  return JSON.stringify({ object: 'error', message, type: errorTypeFor(status), code: status });
}
