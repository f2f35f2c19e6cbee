import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RoutingService } from '../../src/modules/routing/routing.service.js';
import { spawnSim, simRequest, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { startTestRouter, type TestRouter } from '../support/router.js';
import { parseProm, sum } from '../support/prom.js';

const chat = Buffer.from(JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }));

/**
 * A router bug inside the data plane's handling (here: the routing step throws once) must not
 * become an unhandled rejection, which would end the process and every stream it carries.
 */
describe('a throw inside the data plane', () => {
  let sim: SimProcess;
  let router: TestRouter;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);

  before(async () => {
    sim = await spawnSim({ name: 'only' });
    router = await startTestRouter({ replicas: [{ name: 'only', host: '127.0.0.1', port: sim.port }] });
    process.on('unhandledRejection', onUnhandled);
  });
  after(async () => {
    process.off('unhandledRejection', onUnhandled);
    await router?.close();
    await stopAllSims();
  });

  it('answers 500 internal_error in the OpenAI shape, logs and counts it, and serves the next request', async () => {
    // Fault injection: the real routing service, whose next route() call throws.
    const routing = router.app.get(RoutingService);
    const route = routing.route.bind(routing);
    let armed = true;
    routing.route = (...args: Parameters<RoutingService['route']>) => {
      if (!armed) return route(...args);
      armed = false;
      throw new Error('injected routing bug');
    };

    const failed = await simRequest(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'req-boom', 'x-session-id': 'boom' },
      body: chat,
    });
    assert.equal(failed.status, 500);
    assert.equal(failed.headers['content-type'], 'application/json');
    assert.equal(failed.headers['x-request-id'], 'req-boom');
    const e = JSON.parse(failed.body.toString()) as Record<string, unknown>;
    assert.deepEqual({ object: e['object'], type: e['type'], code: e['code'] }, { object: 'error', type: 'server_error', code: 'internal_error' });
    // The client gets the request id to quote, never the cause.
    assert.match(String(e['message']), /req-boom/);
    assert.doesNotMatch(String(e['message']), /injected/);

    // The next request is served as usual, by the same process.
    const ok = await simRequest(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 'boom' },
      body: chat,
    });
    assert.equal(ok.status, 200);
    assert.equal((await sim.stats()).requests, 1, 'only the second request reached the replica');
    assert.equal(router.outstanding('only'), 0);

    // The operator's view: one error line with the request id and the cause, the request line, the counters.
    const err = await router.waitForLog((l) => l['event'] === 'internal_error');
    assert.deepEqual(
      [err['level'], err['reqId'], err['source'], err['method'], err['path'], err['count']],
      [50, 'req-boom', 'data_plane', 'POST', '/v1/chat/completions', 1],
    );
    assert.match(String((err['err'] as { message?: unknown }).message), /injected routing bug/);
    const line = await router.waitForLog((l) => l['event'] === 'request' && l['reqId'] === 'req-boom');
    assert.deepEqual([line['status'], line['cause']], [500, 'internal_error']);
    const { samples, problems } = parseProm((await simRequest(`${router.url}/metrics`)).body.toString());
    assert.deepEqual(problems, []);
    assert.equal(sum(samples, 'affinity_router_internal_errors_total', { source: 'data_plane' }), 1);
    assert.equal(sum(samples, 'affinity_router_internal_errors_total', { source: 'unhandled_rejection' }), 0);
    assert.equal(sum(samples, 'affinity_router_request_terminations_total', { cause: 'internal_error' }), 1);
    assert.deepEqual(unhandled, []);
  });
});
