import { Injectable } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { Clock } from '../../common/clock.js';
import type { Replica } from '../registry/replica.js';
import { peekTopLevelString } from './body-peek.js';
import { resolveSessionId, type ResolvedSession } from './session-id.js';
import { SessionDirectory } from './session-directory.js';

/** The session directory and session-id extraction, configured once. */
@Injectable()
export class AffinityService {
  readonly directory: SessionDirectory<Replica>;
  readonly headerName: string;
  private readonly bodyField: string;
  private readonly bodyNeedle: Buffer;

  constructor(
    config: RouterConfig,
    readonly clock: Clock,
  ) {
    this.directory = new SessionDirectory<Replica>(config.routing.sessionTtlMs, config.routing.maxSessions);
    this.headerName = config.routing.sessionHeader.toLowerCase();
    this.bodyField = config.routing.bodyField;
    this.bodyNeedle = Buffer.from(JSON.stringify(this.bodyField));
  }

  /** Effective session of a request: header value as received, and the buffered body. */
  resolve(header: string | string[] | undefined, body: Buffer | undefined): ResolvedSession {
    const h = Array.isArray(header) ? header[0] : header;
    const bodyId = body === undefined ? undefined : peekTopLevelString(body, this.bodyField, this.bodyNeedle);
    return resolveSessionId(h, bodyId);
  }
}
