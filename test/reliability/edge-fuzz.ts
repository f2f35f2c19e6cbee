/**
 * Generators of the edge fuzz (issue 19 item 8, run by fuzz.test.ts): raw HTTP requests against the
 * proxy port and the admin API — malformed framing, smuggling variants, hostile JSON, hostile
 * admin bodies, clients that leave mid-request. Each case is bytes to write on a fresh connection
 * plus what the router must do with them.
 */
import fc from 'fast-check';

export interface EdgeCase {
  readonly kind: 'admin' | 'raw' | 'json' | 'abort';
  /** What is written on the connection. */
  readonly bytes: Buffer;
  /** Close the connection from the client side after this many ms (a client that leaves). */
  readonly abortAfterMs?: number;
  /** Admin cases: the token sent was the right one. */
  readonly authorized?: boolean;
  /** Admin cases: a GET of a session id the data plane accepts as it is (so never a 414/400). */
  readonly sessionRead?: boolean;
  readonly label: string;
}

const CRLF = '\r\n';
const CHAT = '{"model":"sim-model","prompt":"hi","max_tokens":1}';
const deep = (n: number, open = '[', close = ']'): string => open.repeat(n) + close.repeat(n);

const hostileJson = fc.oneof(
  fc.integer({ min: 1, max: 120_000 }).map((n) => deep(n)),
  fc.integer({ min: 1, max: 5_000 }).map((n) => `{"replica":${deep(n)}}`),
  fc.integer({ min: 1, max: 3_000 }).map((n) => '{"a":'.repeat(n) + '1' + '}'.repeat(n)),
  fc.constantFrom(
    '{"__proto__":{"polluted":true},"draining":true}',
    '{"constructor":{"prototype":{"polluted":true}}}',
    '{"session\\u005fid":"esc","replica":"f0"}',
    '{"session_id":"a","session_id":"b","replica":"f0"}',
    '{"session_id":12,"draining":"true"}',
    '{"count":1e309}',
    '{"count":-0,"host":"\\ud800"}',
    '"just a string"',
    'null',
    '{',
    '{"replica":"f0"}garbage',
  ),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? 'null'),
  fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a).toString('latin1')),
  fc.integer({ min: 1, max: 300_000 }).map((n) => `{"replica":"${'x'.repeat(n)}"}`),
);

const validId = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9._:-]{1,20}$/),
  fc.integer({ min: 100, max: 128 }).map((n) => 'i'.repeat(n)),
);
const segment = fc.oneof(
  validId,
  fc.constantFrom('f0', '%zz', '%', '%2e%2e', '..', '%00', '%ff', '%E2%80%A8', 'a'.repeat(2_000), '%0d%0aX-Evil:%201'),
  fc.string({ maxLength: 12 }).map(encodeURIComponent),
);
const auth = fc.constantFrom('good', 'good', 'none', 'wrong', 'nbsp', 'lower', 'double');
function authHeader(a: string, token: string): string {
  switch (a) {
    case 'good':
      return `Authorization: Bearer ${token}${CRLF}`;
    case 'wrong':
      return `Authorization: Bearer ${token}x${CRLF}`;
    case 'nbsp':
      return `Authorization: Bearer\xa0${token}${CRLF}`;
    case 'lower':
      return `authorization: bearer  ${token}${CRLF}`;
    case 'double':
      return `Authorization: Bearer ${token}${CRLF}Authorization: Bearer nope${CRLF}`;
    default:
      return '';
  }
}

interface AdminParts {
  readonly method: string;
  readonly base: string;
  readonly seg: string | undefined;
  readonly auth: string;
  readonly type: string;
  readonly body: string | undefined;
  readonly chunked: boolean;
}

/** The bytes of one admin request (with `Connection: close`) and what the router must do with it. */
export function adminRequest(token: string, { method, base, seg, auth: a, type, body, chunked }: AdminParts): EdgeCase {
  const path = seg === undefined ? base : `${base}/${seg}`;
  let head = `${method} ${path} HTTP/1.1${CRLF}Host: r${CRLF}${authHeader(a, token)}`;
  if (type !== '') head += `Content-Type: ${type}${CRLF}`;
  let payload = '';
  if (body !== undefined) {
    const b = Buffer.from(body, 'latin1');
    if (chunked) {
      head += `Transfer-Encoding: chunked${CRLF}`;
      payload = `${b.length.toString(16)}${CRLF}${body}${CRLF}0${CRLF}${CRLF}`;
    } else {
      head += `Content-Length: ${b.length}${CRLF}`;
      payload = body;
    }
  } else if (method !== 'GET') head += `Content-Length: 0${CRLF}`;
  const sessionRead = method === 'GET' && base === '/sessions' && seg !== undefined && /^[A-Za-z0-9._:-]{1,128}$/.test(seg);
  return {
    kind: 'admin' as const,
    bytes: Buffer.from(head + 'Connection: close' + CRLF + CRLF + payload, 'latin1'),
    // Node keeps the first of repeated Authorization headers.
    authorized: a === 'good' || a === 'lower' || a === 'double',
    sessionRead,
    label: `${method} ${path.slice(0, 60)} auth=${a} body=${(body ?? '').slice(0, 40)}`,
  };
}

function adminCase(token: string): fc.Arbitrary<EdgeCase> {
  return fc
    .record({
      method: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE'),
      base: fc.constantFrom('/replicas', '/fleet', '/sessions', '/sessions', '/%72eplicas', '//sessions'),
      seg: fc.option(segment, { nil: undefined }),
      auth,
      type: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/xml', 'text/plain', ''),
      body: fc.option(hostileJson, { nil: undefined }),
      chunked: fc.boolean(),
    })
    .map((parts) => adminRequest(token, parts));
}

/**
 * Cases every run starts with, one or more per guarantee of issue 19 (items 1 to 5), so that the
 * suite fails whichever of them is undone, whatever the seed.
 */
export function edgeExamples(token: string): EdgeCase[] {
  const a = (method: string, base: string, seg: string | undefined, auth: string, body?: string, type = 'application/json'): EdgeCase =>
    adminRequest(token, { method, base, seg, auth, type, body, chunked: false });
  const head = `POST /v1/completions HTTP/1.1${CRLF}Host: r${CRLF}Content-Type: application/json${CRLF}`;
  return [
    a('GET', '/sessions', 'i'.repeat(128), 'good'),
    a('GET', '/sessions', 'i'.repeat(101), 'good'),
    a('PUT', '/sessions', 'x', 'good', deep(2_000)),
    a('PATCH', '/replicas', 'f0', 'good', '{"a":'.repeat(3_000) + '1' + '}'.repeat(3_000)),
    a('POST', '/replicas', undefined, 'good', `{"count":${deep(2_500)}}`),
    a('PUT', '/sessions', 'x', 'none', '{not json'),
    a('PATCH', '/replicas', 'f0', 'none', ' '.repeat(2 * 1024 * 1024)),
    a('POST', '/replicas', undefined, 'none', '<count>1</count>', 'application/xml'),
    a('DELETE', '/sessions', 'p'.repeat(1_000), 'none'),
    a('DELETE', '/sessions', '%zz', 'none'),
    a('DELETE', '/sessions', '%zz', 'good'),
    { kind: 'raw', bytes: Buffer.from(`GET /replicas HTTP/1.1${CRLF}Host: r${CRLF}X-Big: ${'b'.repeat(20_000)}${CRLF}${CRLF}`, 'latin1'), label: 'admin 431' },
    { kind: 'raw', bytes: Buffer.from(`GET /fleet HTTP/1.1${CRLF}Bad Header${CRLF}${CRLF}`, 'latin1'), label: 'admin malformed' },
    { kind: 'abort', bytes: Buffer.from(`${head}Content-Length: 500${CRLF}${CRLF}{"model":`, 'latin1'), abortAfterMs: 100, label: 'abort mid-body' },
    { kind: 'abort', bytes: Buffer.from(`${head}Content-Length: 100${CRLF}`, 'latin1'), abortAfterMs: 100, label: 'abort mid-headers' },
  ];
}

/** Request framings a proxy must refuse or read exactly one way (request smuggling, RFC 9112 §6). */
const SMUGGLE_TEMPLATES: ReadonlyArray<(path: string) => string> = [
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Content-Length: ${CHAT.length}${CRLF}Transfer-Encoding: chunked${CRLF}${CRLF}0${CRLF}${CRLF}${CHAT}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Transfer-Encoding: chunked${CRLF}Content-Length: 4${CRLF}${CRLF}5c${CRLF}${CHAT}${CRLF}0${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Content-Length: ${CHAT.length}${CRLF}Content-Length: 5${CRLF}${CRLF}${CHAT}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Transfer-Encoding: xchunked${CRLF}${CRLF}${CHAT}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Transfer-Encoding: chunked, identity${CRLF}${CRLF}0${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Transfer-Encoding:\tchunked${CRLF}Content-Length: 3${CRLF}${CRLF}0${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Transfer-Encoding: chunked${CRLF} chunked${CRLF}${CRLF}0${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1\nHost: r\nContent-Length: ${CHAT.length}\n\n${CHAT}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Content-Length: -1${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Content-Length: 1e3${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Transfer-Encoding: chunked${CRLF}${CRLF}zz${CRLF}${CHAT}${CRLF}0${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Transfer-Encoding: chunked${CRLF}${CRLF}1;ext=${'e'.repeat(20_000)}${CRLF}x${CRLF}0${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}X-Session-Id: a\x00b${CRLF}Content-Length: 0${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}X-Big: ${'b'.repeat(20_000)}${CRLF}Content-Length: 0${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Bad Header: 1${CRLF}Content-Length: 0${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.0${CRLF}Host: r${CRLF}Transfer-Encoding: chunked${CRLF}${CRLF}0${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Content-Length: 0${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/1.1${CRLF}Host: r${CRLF}Content-Length: 0${CRLF}${CRLF}NOT HTTP AT ALL${CRLF}${CRLF}`,
  (p) => `PO ST ${p} HTTP/1.1${CRLF}Host: r${CRLF}${CRLF}`,
  (p) => `POST ${p} HTTP/9.9${CRLF}Host: r${CRLF}${CRLF}`,
  () => `\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03`,
  // leading empty lines are allowed (RFC 9112 §2.2); what follows them is not HTTP
  () => `${CRLF}${CRLF}GARBAGE${CRLF}${CRLF}`,
];

const rawCase: fc.Arbitrary<EdgeCase> = fc
  .record({
    t: fc.integer({ min: 0, max: SMUGGLE_TEMPLATES.length - 1 }),
    path: fc.constantFrom('/v1/completions', '/v1/chat/completions', '/replicas', '/sessions/x'),
  })
  .map(({ t, path }) => ({ kind: 'raw' as const, bytes: Buffer.from(SMUGGLE_TEMPLATES[t](path), 'latin1'), label: `smuggle #${t} ${path}` }));

const jsonCase: fc.Arbitrary<EdgeCase> = fc
  .record({ body: hostileJson, session: fc.option(fc.constantFrom('s-1', 'x'.repeat(300), 'a b', ''), { nil: undefined }) })
  .map(({ body, session }) => {
    const b = Buffer.from(body, 'latin1');
    const head = `POST /v1/completions HTTP/1.1${CRLF}Host: r${CRLF}Content-Type: application/json${CRLF}Content-Length: ${b.length}${CRLF}${
      session !== undefined ? `X-Session-Id: ${session}${CRLF}` : ''
    }Connection: close${CRLF}${CRLF}`;
    return { kind: 'json' as const, bytes: Buffer.concat([Buffer.from(head, 'latin1'), b]), label: `json ${body.slice(0, 50)}` };
  });

const abortCase: fc.Arbitrary<EdgeCase> = fc
  .record({ cut: fc.integer({ min: 1, max: 200 }), declared: fc.integer({ min: 10, max: 5_000 }), ms: fc.integer({ min: 20, max: 150 }) })
  .map(({ cut, declared, ms }) => {
    const full = `POST /v1/completions HTTP/1.1${CRLF}Host: r${CRLF}Content-Type: application/json${CRLF}Content-Length: ${declared}${CRLF}${CRLF}${CHAT}`;
    return {
      kind: 'abort' as const,
      bytes: Buffer.from(full.slice(0, Math.min(cut, full.length)), 'latin1'),
      abortAfterMs: ms,
      label: `abort after ${cut} bytes`,
    };
  });

export function edgeCase(token: string): fc.Arbitrary<EdgeCase> {
  return fc.oneof(
    { weight: 4, arbitrary: adminCase(token) },
    { weight: 3, arbitrary: rawCase },
    { weight: 2, arbitrary: jsonCase },
    { weight: 1, arbitrary: abortCase },
  );
}
