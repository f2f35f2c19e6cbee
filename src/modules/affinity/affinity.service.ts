import { Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { Clock } from '../../common/clock.js';
import { peekTopLevelStrings, type JsonKind } from './body-peek.js';
import { bodyPromptChain } from './prefix-hash.js';
import { resolveSessionId, type RequestKeys } from './session-id.js';

/** Both fields keep JSON.parse's last-wins rule; a `model` key that occurs once ends the scan early (see peekTopLevelStrings). */
const FIRST_WINS = [false, true];

/**
 * Session-id and routing-key extraction, configured once. The session directory and the prefix
 * index it feeds are routing's (RoutingService owns and writes them).
 */
@Injectable()
export class AffinityService {
  /** `prefix_affinity`: a request with no id gets its prompt's block-hash chain. */
  private readonly prefixAffinity: boolean;
  /** The quoted keys peeked in one pass: the session field, then `model` (contract §4.3); rebuilt when a reload changes the field. */
  private peeked: { readonly field: string; readonly needles: readonly Buffer[] } | undefined;

  constructor(
    private readonly config: RouterConfig,
    readonly clock: Clock,
  ) {
    this.prefixAffinity = config.routing.prefixAffinity;
  }

  /** The session header, read at each request: a config reload changes it for the next one (docs/reload.md). */
  get headerName(): string {
    return this.config.routing.sessionHeader.toLowerCase();
  }

  private get needles(): readonly Buffer[] {
    const field = this.config.routing.bodyField;
    if (this.peeked?.field !== field) this.peeked = { field, needles: [Buffer.from(JSON.stringify(field)), Buffer.from('"model"')] };
    return this.peeked.needles;
  }

  /**
   * Effective session of a request: header value as received, and the buffered body. A request with
   * no id at all also gets its prompt's block-hash chain (prefix affinity); the body of one with an
   * id is never parsed. The body's top-level string `model`, when it has one, comes along (peeked
   * in the same pass as the session field).
   */
  resolve(header: string | string[] | undefined, body: Buffer | undefined): RequestKeys {
    const h = Array.isArray(header) ? header[0] : header;
    const kinds: Array<JsonKind | undefined> = [];
    const [bodyId, model] = body === undefined ? [] : peekTopLevelStrings(body, this.needles, FIRST_WINS, kinds);
    const session = resolveSessionId(h, bodyId);
    const modelKind = kinds[1];
    const keys: RequestKeys =
      model !== undefined ? { session, model } : modelKind !== undefined && modelKind !== 'string' ? { session, modelType: modelKind } : { session };
    if (session.source !== 'minted' || body === undefined || !this.prefixAffinity) return keys;
    const prefix = bodyPromptChain(body);
    return prefix.blocks.length === 0 ? keys : { ...keys, prefix };
  }
}
