/** The simulator as a process: startup delay, TLS, signals and argv errors. */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { freePort, tcpProbe, SIM_ENTRY, simRequest, spawnSim, stopAllSims } from '../support/sim-process.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

function runToExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SIM_ENTRY, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

describe('simulator process', () => {
  after(stopAllSims);

  it('exits 2 with a message naming an unknown flag', async () => {
    const { code, stderr } = await runToExit(['--port', '0', '--bogus']);
    assert.equal(code, 2);
    assert.match(stderr, /^error: unknown flag --bogus$/m);
  });

  it('exits 2 for --fault-refuse without a port, and spawnSim reports the stderr', async () => {
    await assert.rejects(spawnSim({ args: ['--fault-refuse'] }), /exited before listening \(code 2[\s\S]*--fault-refuse needs an explicit non-zero --port/);
  });

  it('refuses connections during --startup-delay and listens afterwards', async () => {
    const port = await freePort();
    const t0 = Date.now();
    const started = spawnSim({ port, args: ['--startup-delay', '1'] });
    let refusals = 0;
    let firstOpen = -1;
    while (firstOpen < 0 && Date.now() - t0 < 10_000) {
      const result = await tcpProbe(port);
      if (result === 'open') firstOpen = Date.now() - t0;
      else if (result === 'ECONNREFUSED') refusals++;
      if (firstOpen < 0) await sleep(25);
    }
    const sim = await started;
    assert.ok(refusals > 0, 'connections were refused while loading');
    assert.ok(firstOpen >= 1_000, `first connection accepted after ${firstOpen} ms`);
    assert.equal((await simRequest(`${sim.url}/health`)).status, 200);
  });

  it('exits 0 on SIGTERM, even with a request hanging', async () => {
    const sim = await spawnSim({ args: ['--fault-hang', 'headers'] });
    const pending = simRequest(`${sim.url}/v1/models`).catch((err: unknown) => err);
    while ((await sim.stats()).inflight === 0) await sleep(10);
    sim.child.kill('SIGTERM');
    assert.deepEqual(await sim.exited(), { code: 0, signal: null });
    assert.ok((await pending) instanceof Error, 'the hanging request was dropped');
    assert.equal(await tcpProbe(sim.port), 'ECONNREFUSED');
  });

  it('serves https with --tls-cert/--tls-key', async () => {
    const dir = tempDir('sim-tls-');
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    await promisify(execFile)('openssl', [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '-days',
      '1',
      '-keyout',
      key,
      '-out',
      cert,
    ]);
    const sim = await spawnSim({ name: 'secure', args: ['--tls-cert', cert, '--tls-key', key] });
    assert.match(sim.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    // Verified against the generated certificate, not with verification switched off.
    const { status, replica, body } = await new Promise<{ status: number; replica: unknown; body: string }>((resolve, reject) => {
      const req = request(`${sim.url}/v1/models`, { ca: readFileSync(cert), agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (s: string) => (text += s));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, replica: res.headers['x-replica-name'], body: text }));
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(status, 200);
    assert.equal(replica, 'secure');
    assert.match(body, /"object":"list"/);
    await assert.rejects(simRequest(`http://127.0.0.1:${sim.port}/health`, { timeoutMs: 2_000 }));
  });
});
