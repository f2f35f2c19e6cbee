import type { ServerResponse } from 'node:http';

/** Errors the router itself answers on the data plane (contract §3), in the vLLM/OpenAI shape. */
export const ROUTER_ERRORS = {
  no_replica_available: { status: 503, type: 'service_unavailable', message: 'no serving replica is currently routable' },
  shutting_down: { status: 503, type: 'service_unavailable', message: 'the router is shutting down' },
  overloaded: { status: 503, type: 'service_unavailable', message: 'every replica is at its max_inflight and the router cannot queue the request' },
  replica_unreachable: { status: 502, type: 'bad_gateway', message: 'no replica could be connected to' },
  replica_disconnected: { status: 502, type: 'bad_gateway', message: 'the replica closed the connection before answering' },
  replica_timeout: { status: 504, type: 'timeout', message: 'the replica did not answer in time' },
  model_not_found: { status: 404, type: 'invalid_request_error', message: 'no replica serves the requested model' },
  body_too_large: { status: 413, type: 'invalid_request_error', message: 'request body is larger than the router accepts' },
  invalid_model: { status: 400, type: 'invalid_request_error', message: '`model` must be a string' },
  invalid_body: { status: 400, type: 'invalid_request_error', message: 'the request body cannot be decoded' },
  unsupported_encoding: { status: 415, type: 'invalid_request_error', message: 'the request body has a content encoding the router cannot read' },
  invalid_path: { status: 400, type: 'invalid_request_error', message: 'the request path has dot segments' },
  method_not_allowed: { status: 405, type: 'invalid_request_error', message: 'the method is not allowed on the data plane' },
  internal_error: { status: 500, type: 'server_error', message: 'the router failed while handling the request' },
} as const;

export type RouterErrorCode = keyof typeof ROUTER_ERRORS;

/** Longest model name quoted back in an error message (the name comes from the client). */
const MAX_QUOTED_MODEL = 200;

/** A client's model name as an error message quotes it: JSON-quoted, cut at 200 characters. */
export function quotedModel(model: string): string {
  return JSON.stringify(model.length > MAX_QUOTED_MODEL ? `${model.slice(0, MAX_QUOTED_MODEL)}...` : model);
}

/** The message of a 503 `no_replica_available`, naming the request's model when it has one (contract §4.3). */
export function noReplicaMessage(model: string | undefined): string | undefined {
  return model === undefined ? undefined : `no replica serving the model ${quotedModel(model)} is currently routable`;
}

export function errorBody(code: RouterErrorCode, message?: string): string {
  const e = ROUTER_ERRORS[code];
  return JSON.stringify({ object: 'error', message: message ?? e.message, type: e.type, code });
}

/** Write a router error unless the response has already started. */
export function sendRouterError(res: ServerResponse, code: RouterErrorCode, headers: Record<string, string>, message?: string): void {
  if (res.headersSent || res.destroyed) return;
  const body = errorBody(code, message);
  const e = ROUTER_ERRORS[code];
  res.statusCode = e.status;
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.setHeader('content-type', 'application/json');
  res.setHeader('content-length', Buffer.byteLength(body));
  if (e.status === 503) res.setHeader('retry-after', '1');
  res.end(body);
}

/** The final SSE event of a stream the router had to cut (contract §3). */
export function streamErrorEvent(code: 'replica_disconnected' | 'replica_timeout', message: string): string {
  return `data: ${JSON.stringify({ error: { type: 'upstream_error', code, message } })}\n\n`;
}
