import { Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { Clock } from '../../common/clock.js';
import type { Replica } from '../registry/replica.js';
import { peekTopLevelStrings, type JsonKind } from './body-peek.js';
import { bodyPromptChain } from './prefix-hash.js';
import { PrefixIndex } from './prefix-index.js';
import { resolveSessionId, type RequestKeys } from './session-id.js';
import { SessionDirectory } from './session-directory.js';

/** Both fields keep JSON.parse's last-wins rule; a `model` key that occurs once ends the scan early (see peekTopLevelStrings). */
const FIRST_WINS = [false, true];

/** The session directory and session-id extraction, configured once. */
@Injectable()
export class AffinityService {
  readonly directory: SessionDirectory<Replica>;
  /** Which replica last served which prompt prefix (contract §4.1); undefined when `prefix_affinity` is off. */
  readonly prefixes: PrefixIndex<Replica> | undefined;
  readonly headerName: string;
  private readonly bodyField: string;
  /** The quoted keys peeked in one pass: the session field, then `model` (contract §4.3). */
  private readonly needles: readonly Buffer[];

  constructor(
    config: RouterConfig,
    readonly clock: Clock,
  ) {
    this.directory = new SessionDirectory<Replica>(config.routing.sessionTtlMs, config.routing.maxSessions);
    this.prefixes = config.routing.prefixAffinity ? new PrefixIndex<Replica>(config.routing.prefixBlocks) : undefined;
    this.headerName = config.routing.sessionHeader.toLowerCase();
    this.bodyField = config.routing.bodyField;
    this.needles = [Buffer.from(JSON.stringify(this.bodyField)), Buffer.from('"model"')];
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
    if (session.source !== 'minted' || body === undefined || this.prefixes === undefined) return keys;
    const prefix = bodyPromptChain(body);
    return prefix.blocks.length === 0 ? keys : { ...keys, prefix };
  }
}
