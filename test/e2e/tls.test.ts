import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSim, simRequest, stopAllSims, type SimProcess } from '../support/sim-process.js';
import { startTestRouter, waitFor } from '../support/router.js';
import { makeSelfSignedCert } from '../support/tls.js';

describe('https replicas (contract §2 scheme/ca_file)', () => {
  let sim: SimProcess;
  let certFile: string;

  before(async () => {
    const cert = makeSelfSignedCert();
    certFile = cert.certFile;
    sim = await spawnSim({ name: 'secure', args: ['--tls-cert', cert.certFile, '--tls-key', cert.keyFile] });
  });
  after(stopAllSims);

  const body = Buffer.from(JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }));

  it('routes to an https replica whose certificate verifies against ca_file', async () => {
    const router = await startTestRouter({ replicas: [{ name: 'secure', host: '127.0.0.1', port: sim.port, scheme: 'https', ca_file: certFile }] });
    try {
      const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', body });
      assert.equal(r.status, 200);
      assert.equal(r.headers['x-replica-name'], 'secure');
    } finally {
      await router.close();
    }
  });

  it('refuses an https replica whose certificate does not verify, with a log line that says how to fix it', async () => {
    const before = (await sim.stats()).requests;
    const router = await startTestRouter({ replicas: [{ name: 'secure', host: '127.0.0.1', port: sim.port, scheme: 'https' }] });
    try {
      const line = await router.waitForLog((l) => l['event'] === 'tls_error');
      assert.equal(line['replica'], 'secure');
      assert.match(String(line['msg']), /ca_file/);
      await waitFor(async () => (await simRequest(`${router.url}/health`)).status === 503, 10_000, 'the replica to be unroutable');
      const r = await simRequest(`${router.url}/v1/chat/completions`, { method: 'POST', body });
      assert.equal(r.status, 503);
      assert.equal((await sim.stats()).requests, before);
    } finally {
      await router.close();
    }
  });
});
