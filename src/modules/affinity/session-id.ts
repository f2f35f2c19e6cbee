import { createHash, randomBytes } from 'node:crypto';
import { CLIENT_ID } from '../../common/client-id.js';
import type { PromptChain } from './prefix-hash.js';

export type SessionSource = 'header' | 'body' | 'minted';

export interface ResolvedSession {
  readonly id: string;
  readonly source: SessionSource;
  /** True when the client's id was invalid and `id` is its stable replacement. */
  readonly replaced: boolean;
}

/** What one pass over a request's header and body finds: its session, and what routing keys on. */
export interface RequestKeys {
  readonly session: ResolvedSession;
  /**
   * A `minted` session only, with prefix affinity on: the block-hash chain of its prompt
   * (prefix-hash.ts), absent when the body has no usable prompt.
   */
  readonly prefix?: PromptChain;
  /** The body's top-level string `model` (contract §4.3), absent when it has none or is not JSON. */
  readonly model?: string;
  /** The body has a top-level `model` that is not a string: its JSON type (the request is refused with 400). */
  readonly modelType?: string;
}

/** `h-` + first 32 hex chars of sha256 over the id's bytes: same bad id, same session, every turn. */
export function replacementId(bytes: string | Buffer): string {
  return 'h-' + createHash('sha256').update(bytes).digest('hex').slice(0, 32);
}

export function mintSessionId(): string {
  return randomBytes(16).toString('hex');
}

/**
 * Resolve the effective session id. A valid header wins; an invalid or empty header does not hide
 * a valid body id; an invalid id (header first, then body) is replaced by its stable hash; no id at
 * all mints a fresh one.
 *
 * @param header  the raw header value (latin1 string as Node received it), if any
 * @param bodyId  the body field's decoded string value, if the body had one
 */
export function resolveSessionId(header: string | undefined, bodyId: string | undefined): ResolvedSession {
  if (header !== undefined && CLIENT_ID.test(header)) return { id: header, source: 'header', replaced: false };
  if (bodyId !== undefined && CLIENT_ID.test(bodyId)) return { id: bodyId, source: 'body', replaced: false };
  if (header !== undefined && header.length > 0) {
    // Node decodes header bytes as latin1, so this recovers the bytes as received.
    return { id: replacementId(Buffer.from(header, 'latin1')), source: 'header', replaced: true };
  }
  if (bodyId !== undefined && bodyId.length > 0) {
    return { id: replacementId(Buffer.from(bodyId, 'utf8')), source: 'body', replaced: true };
  }
  return { id: mintSessionId(), source: 'minted', replaced: false };
}
