import { createHash, timingSafeEqual } from 'node:crypto';

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/** Short, non-reversible id of a token for audit lines: who did it, without the secret. */
export function tokenId(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex').slice(0, 12);
}

/**
 * `Bearer`, ASCII spaces or tabs, then the token: visible ASCII only. Unicode whitespace (a
 * no-break space, U+2028, ...) is not a separator here, as in RFC 9110's grammar, so
 * `Bearer\xa0<token>` is refused like any malformed header (docs/admin-api.md, "Auth").
 */
const BEARER = /^bearer[ \t]+([\x21-\x7e]+)[ \t]*$/i;

/** The outcome of checking one request's credentials. */
export type AdminAuth = { readonly ok: true; readonly who: string } | { readonly ok: false; readonly status: 401 | 403; readonly message: string };

/**
 * Checks `Authorization: Bearer <token>` (contract §1). Both sides are hashed first so the
 * comparison is constant-time whatever the lengths. No token configured ⇒ 403 (fail closed)
 * unless the admin API was opened explicitly (`--admin-open`).
 */
export class AdminTokenCheck {
  private readonly expected: Buffer | undefined;

  constructor(
    token: string | undefined,
    private readonly open: boolean,
  ) {
    this.expected = token !== undefined ? digest(token) : undefined;
  }

  check(header: string | string[] | undefined): AdminAuth {
    if (this.expected === undefined) {
      if (this.open) return { ok: true, who: 'open' };
      return {
        ok: false,
        status: 403,
        message: 'the admin API is disabled: no admin token is configured (set ROUTER_ADMIN_TOKEN, or start with --admin-open)',
      };
    }
    const m = typeof header === 'string' ? BEARER.exec(header) : null;
    const given = m?.[1] ?? '';
    const ok = timingSafeEqual(digest(given), this.expected) && m !== null;
    if (ok) return { ok: true, who: tokenId(given) };
    return { ok: false, status: 401, message: m === null ? 'admin token required (Authorization: Bearer <token>)' : 'admin token is wrong' };
  }
}
