import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort, simRequest, simStream, spawnSim, type SimProcess } from '../support/sim-process.js';
import { adminCall, TEST_TOKEN, waitFor, writeTempConfig } from '../support/router.js';
import { spawnRouter, type RouterProcess } from '../support/router-process.js';
import { simHost } from '../support/fleet.js';
import { sessionHash, startTracing, tracingRequested } from '../../src/common/tracing/tracing.js';

/** One span as the OTLP/HTTP JSON encoding carries it, with its resource's attributes beside it. */
interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  status?: { code?: number; message?: string };
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}

interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}

const valueOf = (v: OtlpValue): unknown => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue));
const attributesOf = (list: OtlpAttribute[] | undefined): Record<string, unknown> => Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));

/** A collector stand-in: POST /v1/traces with OTLP JSON, every span kept. */
async function startReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; close(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces' && String(req.headers['content-type']).startsWith('application/json')) {
        const doc = JSON.parse(Buffer.concat(chunks).toString()) as {
          resourceSpans?: Array<{
            resource?: { attributes?: OtlpAttribute[] };
            scopeSpans?: Array<{ spans?: Array<Omit<ReceivedSpan, 'attributes' | 'resource'> & { attributes?: OtlpAttribute[] }> }>;
          }>;
        };
        for (const rs of doc.resourceSpans ?? []) {
          const resource = attributesOf(rs.resource?.attributes);
          for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) spans.push({ ...s, attributes: attributesOf(s.attributes), resource });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, spans, close: () => new Promise((r) => server.close(() => r())) };
}

const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;

for (const workers of [1, 2])
  describe(`OpenTelemetry traces (--workers ${workers})`, () => {
    let sims: SimProcess[];
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    let router: RouterProcess;

    before(async () => {
      receiver = await startReceiver();
      sims = [await spawnSim({ name: 'live', args: ['--itl-ms', '5'] })];
      // `dead` is declared but nothing listens there: an attempt at it is refused, then retried on `live`.
      const dead = await freePort();
      const file = writeTempConfig({
        replicas: [
          { name: 'live', host: '127.0.0.1', port: sims[0].port },
          { name: 'dead', host: '127.0.0.1', port: dead },
        ],
        hosts: [simHost('th', [0], await freePort())],
      });
      router = await spawnRouter(['--config', file, '--health-interval', '60', '--initial-replicas', '0', '--workers', String(workers)], {
        ROUTER_ADMIN_TOKEN: TEST_TOKEN,
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_SERVICE_NAME: 'router-under-test',
        OTEL_BSP_SCHEDULE_DELAY: '50',
      });
    });
    after(async () => {
      router?.child.kill('SIGTERM');
      await router?.exited();
      await Promise.all(sims.map((s) => s.kill()));
      await receiver?.close();
    });

    it('a streamed chat with a client traceparent: a server span in that trace, a client span per attempt (two for a refused connection), the decision, and the replica sees the client span as parent', async () => {
      const session = 'trace-me-please';
      const prompt = 'the secret prompt text';
      // Pin the session to the replica that refuses connections, so its first attempt fails.
      assert.equal((await adminCall(router, 'PUT', `/sessions/${session}`, { body: { replica: 'dead' } })).status, 200);
      const clientTrace = '0af7651916cd43dd8448eb211c80319c';
      const clientSpan = 'b7ad6b7169203331';
      const stream = await simStream(`${router.url}/v1/chat/completions`, {
        headers: { 'x-session-id': session, traceparent: `00-${clientTrace}-${clientSpan}-01`, tracestate: 'vendor=1' },
        body: JSON.stringify({ model: 'sim-model', stream: true, max_tokens: 4, messages: [{ role: 'user', content: prompt }] }),
      });
      assert.equal(stream.status, 200);
      assert.equal(await stream.done, 'end');
      const server = await waitFor(() => receiver.spans.find((s) => s.kind === SERVER && s.traceId === clientTrace), 10_000, 'the server span');
      assert.equal(server.parentSpanId, clientSpan, "the router's span continues the client's");
      assert.equal(server.name, 'POST /v1/chat/completions');
      assert.equal(server.resource['service.name'], 'router-under-test');
      assert.equal(server.resource['affinity_router.process'], workers === 1 ? 'primary' : 'worker', 'the process that relayed it');
      assert.equal(server.attributes['affinity_router.decision'], 'retain');
      assert.equal(server.attributes['affinity_router.session.source'], 'header');
      assert.match(String(server.attributes['affinity_router.session.hash']), /^[0-9a-f]{16}$/);
      assert.equal(server.attributes['affinity_router.model'], 'sim-model');
      assert.equal(server.attributes['affinity_router.cause'], 'ok');
      assert.equal(server.attributes['affinity_router.stream'], true);
      assert.equal(server.attributes['http.response.status_code'], 200);
      const attempts = await waitFor(
        () => {
          const a = receiver.spans.filter((s) => s.kind === CLIENT && s.parentSpanId === server.spanId);
          return a.length === 2 ? a : undefined;
        },
        10_000,
        'two attempt spans',
      );
      const [first, second] = [...attempts].sort((x, y) => Number(x.attributes['affinity_router.attempt']) - Number(y.attributes['affinity_router.attempt']));
      assert.equal(first.attributes['affinity_router.replica'], 'dead');
      assert.equal(first.status?.code, ERROR, 'the refused attempt is an error');
      assert.equal(second.attributes['affinity_router.replica'], 'live');
      assert.equal(second.attributes['http.response.status_code'], 200);
      const seen = JSON.parse((await simRequest(`${sims[0].url}/__sim/stats`)).body.toString()) as { last_request: { headers: Record<string, string> } };
      assert.equal(seen.last_request.headers['traceparent'], `00-${clientTrace}-${second.spanId}-01`, 'the replica sees the attempt span as its parent');
      assert.equal(seen.last_request.headers['tracestate'], 'vendor=1');
      const everything = JSON.stringify(receiver.spans);
      assert.ok(!everything.includes(session), 'no session id in any span');
      assert.ok(!everything.includes(prompt), 'no prompt text in any span');
    });

    it('a request without a traceparent starts a trace of its own', async () => {
      const r = await simRequest(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-session-id': 'fresh-trace' },
        body: Buffer.from(JSON.stringify({ model: 'sim-model', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] })),
      });
      assert.equal(r.status, 200);
      const root = await waitFor(
        () => receiver.spans.find((s) => s.kind === SERVER && s.attributes['affinity_router.session.hash'] === sessionHash('fresh-trace')),
        10_000,
        'its server span',
      );
      assert.equal(root.parentSpanId, undefined);
      assert.notEqual(root.traceId, '0af7651916cd43dd8448eb211c80319c');
    });

    it('fleet actions are spans: a launch, then the drain and the stop of a removal', async () => {
      const launched = await adminCall(router, 'POST', '/replicas');
      assert.equal(launched.status, 202, JSON.stringify(launched.body));
      const removed = await adminCall(router, 'DELETE', '/replicas/th-d0');
      assert.equal(removed.status, 200, JSON.stringify(removed.body));
      for (const name of ['fleet.launch', 'fleet.drain', 'fleet.stop']) {
        const span = await waitFor(() => receiver.spans.find((s) => s.name === name), 10_000, `a ${name} span`);
        assert.equal(span.resource['affinity_router.process'], 'primary');
      }
      assert.equal(receiver.spans.find((s) => s.name === 'fleet.stop')?.attributes['affinity_router.replica'], 'th-d0');
    });

    it('is off without an OTLP endpoint: no provider, no exporter loaded', async () => {
      assert.equal(tracingRequested({}), false);
      assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x', OTEL_SDK_DISABLED: 'true' }), false);
      assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://x', OTEL_TRACES_EXPORTER: 'none' }), false);
      assert.equal(await startTracing({ OTEL_SERVICE_NAME: 'x' }, 'primary', '0'), undefined);
      assert.equal(router.logs().find((l) => l['event'] === 'listening')?.['tracing'], true);
      const file = writeTempConfig({ replicas: [{ name: 'live', host: '127.0.0.1', port: sims[0].port }] });
      const off = await spawnRouter(['--config', file], { OTEL_SERVICE_NAME: 'nothing-to-export-to', OTEL_TRACES_SAMPLER: 'always_on' });
      try {
        assert.equal(off.logs().find((l) => l['event'] === 'listening')?.['tracing'], false);
      } finally {
        off.child.kill('SIGTERM');
        await off.exited();
      }
    });
  });
