import type { ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';

/** The `type` of an error that has no code of its own (a validation 400, Fastify's 413 and 415, a 404), by status. */
const BY_STATUS: Readonly<Record<number, string>> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  413: 'body_too_large',
  414: 'uri_too_long',
  415: 'unsupported_media_type',
  431: 'headers_too_large',
  500: 'internal_error',
};

/** The stable `type` of a problem: `urn:affinity-router:error:<code>`, the code by status when the error has none. */
export function problemType(status: number, code: string | undefined): string {
  const c = code ?? BY_STATUS[status];
  return c !== undefined ? `urn:affinity-router:error:${c}` : 'about:blank';
}

/**
 * An RFC 9457 problem document with pypto-serving-router's `message` member (same text as
 * `detail`): the one shape of every admin API error, whoever raised it (contract §8).
 */
export function problemBody(status: number, detail: string, code?: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    type: problemType(status, code),
    title: STATUS_CODES[status] ?? 'Error',
    status,
    detail,
    message: detail,
    ...(code !== undefined ? { code } : {}),
    ...extra,
  };
}

/** Answer `res` (a raw Node response, outside Fastify) with a problem document, unless it already started. */
export function writeProblem(res: ServerResponse, status: number, detail: string, code: string, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(problemBody(status, detail, code));
  res.statusCode = status;
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.setHeader('content-type', 'application/problem+json');
  res.setHeader('content-length', Buffer.byteLength(text));
  res.end(text);
}
