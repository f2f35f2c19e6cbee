/**
 * Admin API auth, validation, audit and documentation (contract §1, §8): what an operator and a
 * security review see from outside. Complements admin.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { simRequest } from '../support/sim-process.js';
import { adminCall, adminRouterPair, TEST_TOKEN, waitFor, type TestRouter } from '../support/router.js';

type Call = readonly [method: string, path: string, body?: unknown];

/** Every admin route with a body that would be accepted. */
const ROUTES: readonly Call[] = [
  ['GET', '/replicas'],
  ['POST', '/replicas', {}],
  ['DELETE', '/replicas/a0'],
  ['PATCH', '/replicas/a0', { draining: true }],
  ['GET', '/fleet'],
  ['GET', '/sessions'],
  ['GET', '/sessions/x'],
  ['PUT', '/sessions/x', { replica: 'a0' }],
  ['DELETE', '/sessions/x'],
];
const MUTATING: readonly Call[] = ROUTES.filter(([m]) => m !== 'GET');

const audits = (r: TestRouter) => r.logs().filter((l) => l['event'] === 'audit');

describe('admin API auth, validation and audit (contract §8)', () => {
  const routers = adminRouterPair();

  it('answers 403 problem+json on every admin route, DELETE /sessions/:id included, when no token is configured', async () => {
    for (const [method, path, body] of ROUTES) {
      const r = await adminCall(routers.closed, method, path, { token: TEST_TOKEN, body });
      assert.equal(r.status, 403, `${method} ${path}`);
      assert.match(String(r.headers['content-type']), /application\/problem\+json/);
      assert.match(r.body.detail, /no admin token is configured/);
    }
  });

  it('answers 401 on every mutating route for a wrong or missing token, and changes nothing', async () => {
    assert.equal((await adminCall(routers.open, 'PUT', '/sessions/kept', { body: { replica: 'a0' } })).status, 200);
    for (const token of ['wrong', null]) {
      for (const [method, path, body] of [...MUTATING, ['DELETE', '/sessions/kept'] as const, ['POST', '/replicas', { count: 1 }] as const]) {
        const r = await adminCall(routers.open, method, path, { token, body });
        assert.equal(r.status, 401, `${method} ${path} with token ${token}`);
        assert.equal(r.headers['www-authenticate'], 'Bearer');
        assert.match(String(r.headers['content-type']), /application\/problem\+json/);
      }
    }
    assert.equal((await adminCall(routers.open, 'GET', '/sessions/kept')).body.replica, 'a0', 'the pin is still there');
    assert.equal((await adminCall(routers.open, 'GET', '/replicas')).body.replicas[0].draining, false);
    assert.equal((await adminCall(routers.open, 'GET', '/sessions/x')).status, 404, 'nothing was pinned');
  });

  it('rejects an unknown field on every body DTO with 400 problem+json naming it, and changes nothing', async () => {
    for (const [method, path, body] of [
      ['POST', '/replicas', { count: 1, evil: 1 }],
      ['PATCH', '/replicas/a0', { draining: true, evil: 1 }],
      ['PUT', '/sessions/unknown-field', { replica: 'a0', evil: 1 }],
    ] as const) {
      const r = await adminCall(routers.open, method, path, { body });
      assert.equal(r.status, 400, `${method} ${path}`);
      assert.match(String(r.headers['content-type']), /application\/problem\+json/);
      assert.match(r.body.detail, /property evil should not exist/, `${method} ${path}: ${r.body.detail}`);
      assert.deepEqual(r.body.errors, ['property evil should not exist']);
    }
    assert.equal((await adminCall(routers.open, 'GET', '/replicas')).body.replicas[0].draining, false);
    assert.equal((await adminCall(routers.open, 'GET', '/sessions/unknown-field')).status, 404);
  });

  it('writes exactly one audit line per mutating call: successes, domain errors and refusals (401, 403, 400)', async () => {
    let n = 0;
    /** Make `call`, then a marker call; the audit lines between the two markers are the call's. */
    const auditOf = async (router: TestRouter, method: string, path: string, opts: { token?: string | null; body?: unknown }, status: number) => {
      const start = router.logs().length;
      const r = await adminCall(router, method, path, opts);
      assert.equal(r.status, status, `${method} ${path}`);
      const marker = `marker-${++n}`;
      await adminCall(router, 'DELETE', `/sessions/${marker}`);
      const end = router
        .logs()
        .indexOf(await waitFor(() => router.logs().find((l) => l['event'] === 'audit' && String(l['what']).includes(marker)), 5_000, 'the marker audit line'));
      const lines = router
        .logs()
        .slice(start, end)
        .filter((l) => l['event'] === 'audit');
      assert.equal(lines.length, 1, `${method} ${path} (${status}) wrote ${lines.length} audit lines: ${JSON.stringify(lines)}`);
      return lines[0];
    };
    const tokenId = /^[0-9a-f]{12}$/;

    const ok = await auditOf(routers.open, 'PATCH', '/replicas/a0', { body: { draining: false } }, 200);
    assert.deepEqual([ok['what'], ok['result']], ['patch a0 draining=false', 'ok']);
    assert.match(String(ok['who']), tokenId);
    const pin = await auditOf(routers.open, 'PUT', '/sessions/audited', { body: { replica: 'a0' } }, 200);
    assert.deepEqual([pin['what'], pin['result']], ['pin session audited to a0', 'ok']);
    const unpin = await auditOf(routers.open, 'DELETE', '/sessions/audited', {}, 204);
    assert.deepEqual([unpin['what'], unpin['result']], ['unpin session audited', 'ok']);
    const refusedByDomain = await auditOf(routers.open, 'DELETE', '/replicas/a0', {}, 409);
    assert.deepEqual([refusedByDomain['what'], refusedByDomain['result']], ['remove a0', 'not_launched']);

    const wrong = await auditOf(routers.open, 'POST', '/replicas', { token: 'wrong-token-value', body: {} }, 401);
    assert.deepEqual([wrong['who'], wrong['what'], wrong['result']], ['unauthenticated', 'POST /replicas', 'http_401']);
    const missing = await auditOf(routers.open, 'DELETE', '/sessions/someone', { token: null }, 401);
    assert.deepEqual([missing['who'], missing['what'], missing['result']], ['unauthenticated', 'DELETE /sessions/someone', 'http_401']);
    const invalid = await auditOf(routers.open, 'PATCH', '/replicas/a0', { body: { draining: true, evil: 1 } }, 400);
    assert.deepEqual([invalid['what'], invalid['result']], ['PATCH /replicas/a0', 'http_400']);
    assert.match(String(invalid['who']), tokenId, 'a refused but authenticated call names its token id');
    assert.match(String(invalid['detail']), /evil/);
    const badQuery = await auditOf(routers.open, 'DELETE', '/replicas/a0?wait=maybe', {}, 400);
    assert.deepEqual([badQuery['what'], badQuery['result']], ['DELETE /replicas/a0', 'http_400']);
    const forbidden = await auditOf(routers.closed, 'PUT', '/sessions/x', { token: TEST_TOKEN, body: { replica: 'a0' } }, 403);
    assert.deepEqual([forbidden['who'], forbidden['what'], forbidden['result']], ['unauthenticated', 'PUT /sessions/x', 'http_403']);

    // Reads are not audited; no token, right or wrong, is ever written.
    const before = audits(routers.open).length;
    await adminCall(routers.open, 'GET', '/replicas');
    await adminCall(routers.open, 'GET', '/replicas', { token: 'wrong' });
    await auditOf(routers.open, 'DELETE', '/sessions/last', {}, 404);
    assert.equal(audits(routers.open).length, before + 2, 'only the DELETE and its marker');
    for (const r of [routers.open, routers.closed]) {
      const text = JSON.stringify(r.logs());
      assert.equal(text.includes(TEST_TOKEN), false);
      assert.equal(text.includes('wrong-token-value'), false);
    }
  });

  it('documents every property of every schema with an example, and a bearer scheme that does not claim to be a JWT', async () => {
    const doc = JSON.parse((await simRequest(`${routers.open.url}/docs-json`)).body.toString()) as {
      components: {
        schemas: Record<string, { properties?: Record<string, Record<string, unknown>> }>;
        securitySchemes: Record<string, Record<string, unknown>>;
      };
    };
    const schemas = doc.components.schemas;
    const refOf = (p: Record<string, unknown>): string | undefined => {
      const items = p['items'] as Record<string, unknown> | undefined;
      const allOf = p['allOf'] as Array<Record<string, unknown>> | undefined;
      const ref = (p['$ref'] ?? items?.['$ref'] ?? allOf?.[0]?.['$ref']) as string | undefined;
      return ref?.replace('#/components/schemas/', '');
    };
    const missing: string[] = [];
    let checked = 0;
    for (const [name, schema] of Object.entries(schemas)) {
      for (const [prop, p] of Object.entries(schema.properties ?? {})) {
        const ref = refOf(p);
        // A property that is another schema is exemplified by that schema's own properties.
        if (ref !== undefined) assert.ok(schemas[ref], `${name}.${prop} refers to ${ref}, which is documented`);
        else if (!('example' in p)) missing.push(`${name}.${prop}`);
        checked++;
      }
    }
    assert.deepEqual(missing, [], 'properties without an example');
    assert.ok(checked > 50, `${checked} properties checked`);
    for (const s of ['LaunchReplicasDto', 'PatchReplicaDto', 'PinSessionDto', 'ReplicaView', 'SlotView', 'FleetView', 'SessionView']) assert.ok(schemas[s], s);
    const bearer = doc.components.securitySchemes['bearer'];
    assert.deepEqual([bearer?.['type'], bearer?.['scheme']], ['http', 'bearer']);
    assert.equal('bearerFormat' in (bearer ?? {}), false, 'the admin token is an opaque secret, not a JWT');
  });
});
