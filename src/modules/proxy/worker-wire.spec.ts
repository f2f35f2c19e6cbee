import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deserialize, serialize } from 'node:v8';
import { outcomeNamed, switched } from '../routing/routing.policy.js';
import type { FromWorker, ToWorker } from './worker-protocol.js';
import { fromWorkerMessage, fromWorkerWire, toWorkerMessage, toWorkerWire } from './worker-wire.js';

/** Through the channel's own serialiser (V8's), as `child.send` with `serialization: 'advanced'` does. */
const across = <T>(v: T): T => deserialize(serialize(v)) as T;

const marks = { arrived: 1.5e12, upstreamWritten: 1.5e12 + 0.4, upstreamFirstByte: 1.5e12 + 1.2, clientFirstByte: 1.5e12 + 1.3, firstChunk: 0, lastChunk: 0 };

describe('worker messages on the wire', () => {
  it('carries route, end and grant as arrays and gives back every field', () => {
    const messages: FromWorker[] = [
      {
        t: 'route',
        n: 7,
        head: { id: 'req-1', method: 'POST', url: '/v1/chat/completions', remoteAddress: '10.0.0.9' },
        arrived: 1.5e12,
        keys: { session: { id: 'conv-1', source: 'body', replaced: false }, model: 'm' },
        body: undefined,
        firstTurn: { blocks: [11, 22, 33], minMatch: 2 },
      },
      {
        t: 'route',
        n: 8,
        head: { id: 'req-2', method: 'POST', url: '/v1/completions', remoteAddress: undefined, headers: { 'x-a': 'b' } },
        arrived: 1.5e12,
        keys: { session: { id: 'minted-1', source: 'minted', replaced: false }, prefix: { blocks: [5], minMatch: 1 } },
        body: new Uint8Array([1, 2, 3]),
        firstTurn: undefined,
      },
      {
        t: 'end',
        n: 7,
        head: undefined,
        record: {
          session: { id: 'h-abc', source: 'header', replaced: true },
          model: 'm',
          outcome: switched('overload'),
          status: 502,
          cause: 'upstream_error',
          detail: 'socket hang up',
          bytesIn: 1024,
          bytesOut: 0,
          attempts: 2,
          stream: true,
          marks,
        },
      },
      {
        t: 'end',
        n: 9,
        head: { id: 'req-3', method: 'GET', url: '/v1/x', remoteAddress: '::1' },
        record: {
          session: undefined,
          model: undefined,
          outcome: outcomeNamed('none', ''),
          status: 405,
          cause: 'rejected',
          detail: undefined,
          bytesIn: 0,
          bytesOut: 120,
          attempts: 0,
          stream: false,
          marks,
        },
      },
      { t: 'body', n: 7, body: new Uint8Array([9]) },
    ];
    for (const m of messages) {
      const wire = across(fromWorkerWire(m));
      assert.equal(Array.isArray(wire), m.t === 'route' || m.t === 'end', `${m.t}: an array on the wire, or the message as it is`);
      const back = fromWorkerMessage(wire);
      // Undefined fields may come back absent: compare as the receiver reads them.
      assert.deepEqual(JSON.parse(JSON.stringify(back)), JSON.parse(JSON.stringify(m)), `${m.t} ${'n' in m ? m.n : ''}`);
      if (m.t === 'end' && back.t === 'end') assert.equal(back.record.outcome, m.record.outcome, 'the shared outcome object, not a copy');
    }
    const grant: ToWorker = {
      t: 'grant',
      n: 7,
      outcome: outcomeNamed('retain', ''),
      replica: { name: 'a', url: 'https://10.0.0.2:8443', scheme: 'https', host: '10.0.0.2', port: 8443, caFile: '/etc/ca.pem', tlsVerify: true },
    };
    const wire = across(toWorkerWire(grant));
    assert.ok(Array.isArray(wire));
    assert.deepEqual(toWorkerMessage(wire), grant);
    const stop: ToWorker = { t: 'abort', n: 3, reason: 'drain' };
    assert.deepEqual(toWorkerMessage(across(toWorkerWire(stop))), stop);
  });
});
