import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { auditRefusal } from '../audit/audit.js';
import type { AppLogger } from '../logging/logger.js';
import { problemBody } from './problem.js';

/**
 * Errors raised by Fastify's router and by Node's HTTP parser, before any route or exception
 * filter runs, answered in the router's own shapes (contract §8): application/problem+json with a
 * stable `type`, or the OpenAI error shape for a `/v1/` request. Fastify's defaults are plain
 * `application/json` bodies of their own.
 */

/** Router-level errors (FST_ERR_*): their status and the stable code of their `type`. */
const FRAMEWORK: Readonly<Record<string, { status: number; code: string; detail: string }>> = {
  FST_ERR_BAD_URL: { status: 400, code: 'bad_url', detail: 'the request URL has a malformed percent-encoding' },
  FST_ERR_MAX_PARAM_LENGTH: { status: 414, code: 'path_parameter_too_long', detail: 'a path parameter is longer than the router accepts' },
};

/** Fastify's `frameworkErrors` option: a malformed URL, an over-long route parameter. */
export function frameworkErrorHandler(log: () => AppLogger | undefined): (err: Error & { code?: string }, req: FastifyRequest, reply: FastifyReply) => void {
  return (err, req, reply) => {
    const known = FRAMEWORK[err.code ?? ''];
    const status = known?.status ?? 400;
    const detail = known?.detail ?? 'the request could not be routed';
    const l = log();
    if (l !== undefined) auditRefusal(l, req.raw, status, detail);
    void reply
      .status(status)
      .header('content-type', 'application/problem+json')
      .send(JSON.stringify(problemBody(status, detail, known?.code ?? 'bad_request')));
  };
}

/** What Node's parser refused, by error code. */
function clientErrorOf(err: NodeJS.ErrnoException): { status: number; code: string; type: string; detail: string } {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return { status: 408, code: 'request_timeout', type: 'timeout', detail: 'the request was not received in time (--header-timeout / --body-timeout)' };
  }
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    return { status: 431, code: 'headers_too_large', type: 'invalid_request_error', detail: 'the request line and headers are larger than the router accepts' };
  }
  return { status: 400, code: 'malformed_request', type: 'invalid_request_error', detail: 'the request is not valid HTTP/1.1' };
}

/**
 * The HTTP server's `clientError` handler (as Fastify's `clientErrorHandler`): answers the client
 * in the shape of the URL it was sending, when the parser got that far, else problem+json; then
 * closes the connection, as Node does. Nothing is written once a response started on it; garbage
 * after a complete pipelined request is answered once that request's response is out.
 */
export function clientErrorHandler(log: () => AppLogger | undefined): (err: NodeJS.ErrnoException, socket: Socket) => void {
  return (err, socket) => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const s = socket as Socket & { parser?: { incoming?: IncomingMessage | null } | null; _httpMessage?: ServerResponse | null };
    const incoming = s.parser?.incoming ?? undefined;
    const e = clientErrorOf(err);
    const l = log();
    if (incoming !== undefined && l !== undefined) auditRefusal(l, incoming, e.status, e.detail);
    // Garbage pipelined after a complete request: that request's answer goes out first, then the 400.
    const pending = s._httpMessage;
    if (e.status === 400 && pending != null && !pending.writableFinished && !pending.destroyed && incoming?.complete !== false) {
      pending.once('close', () => answer(socket, e, undefined));
      return;
    }
    answer(socket, e, incoming);
  };
}

/** Writes the refusal on the raw socket (unless a response started on it), then closes the connection, as Node does. */
function answer(socket: Socket, e: ReturnType<typeof clientErrorOf>, incoming: IncomingMessage | undefined): void {
  const started = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage?.headersSent === true;
  if (!socket.destroyed && socket.writable && !started) {
    const openai = incoming?.url?.startsWith('/v1/') === true;
    const body = JSON.stringify(openai ? { object: 'error', message: e.detail, type: e.type, code: e.code } : problemBody(e.status, e.detail, e.code));
    const type = openai ? 'application/json' : 'application/problem+json';
    socket.write(
      `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status]}\r\nContent-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/**
 * RFC 9112 §3.2: an HTTP/1.1 request without Host is refused with 400. Node's own check answers an
 * empty 400, so the server is built with `requireHostHeader: false` and the check is made here, in
 * the router's shapes. Returns true when the request was answered.
 */
export function refuseWithoutHost(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.headers.host !== undefined || req.httpVersion !== '1.1') return false;
  const detail = 'an HTTP/1.1 request needs a Host header';
  const openai = req.url?.startsWith('/v1/') === true;
  const body = JSON.stringify(
    openai ? { object: 'error', message: detail, type: 'invalid_request_error', code: 'missing_host' } : problemBody(400, detail, 'missing_host'),
  );
  res.writeHead(400, {
    'content-type': openai ? 'application/json' : 'application/problem+json',
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  });
  res.end(body);
  return true;
}

/**
 * CONNECT asks for a tunnel, which a router of HTTP requests never opens: Node hands it to the
 * server's `connect` event (not the request listener) and, with no listener, closes the connection
 * without a word. It is answered 405 with `Allow` and the router's error body, then closed.
 */
export function refuseConnect<S extends Server>(server: S): S {
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    const body = JSON.stringify({
      object: 'error',
      message: 'CONNECT is not allowed: the router forwards HTTP requests and opens no tunnels',
      type: 'invalid_request_error',
      code: 'method_not_allowed',
    });
    socket.on('error', () => undefined);
    socket.end(
      'HTTP/1.1 405 Method Not Allowed\r\nallow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\ncontent-type: application/json\r\n' +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  return server;
}
