/**
 * OpenAPI drift (issue 5, acceptance 4): the committed `openapi.json` at the repository root must be
 * exactly what the running app serves at `/docs-json`, serialised by the same `stableJson`. A DTO
 * or controller change without `npm run openapi` makes this test fail.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stableJson } from '../../src/tools/openapi-json.js';
import { simRequest } from '../support/sim-process.js';
import { startTestRouter, type TestRouter } from '../support/router.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

const HERE = dirname(fileURLToPath(import.meta.url));
/** The compiled test lives at dist-test/test/e2e/: three levels below the repository root. */
const REPO_ROOT = resolve(HERE, '../../..');
const COMMITTED = join(REPO_ROOT, 'openapi.json');
/** The writer script compiled beside this test's tree (dist-test/src/tools/write-openapi.js). */
const WRITER = resolve(HERE, '../../src/tools/write-openapi.js');
const FIX = 'run `npm run openapi` and commit openapi.json';

/** A message naming the first line where `actual` and `expected` differ. */
function firstDifference(actual: string, expected: string): string {
  const a = actual.split('\n');
  const e = expected.split('\n');
  for (let i = 0; i < Math.max(a.length, e.length); i += 1) {
    if (a[i] !== e[i]) return `first difference at line ${i + 1}:\n  generated: ${a[i] ?? '(end of document)'}\n  committed: ${e[i] ?? '(end of file)'}`;
  }
  return 'the texts differ';
}

function readCommitted(): string {
  try {
    return readFileSync(COMMITTED, 'utf8');
  } catch (e) {
    throw new Error(`cannot read ${COMMITTED} (${(e as Error).message}): ${FIX}`, { cause: e });
  }
}

/** Runs `node <script> <args>` and resolves with its exit code and output; kills it after `timeoutMs`. */
function runNode(script: string, args: string[], timeoutMs: number): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: {} });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${script} did not exit within ${timeoutMs} ms`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolveRun({ code, stderr });
    });
  });
}

describe('OpenAPI document: committed openapi.json has no drift', () => {
  let router: TestRouter;
  before(async () => {
    // A different config from the writer's: the document must not depend on the config.
    router = await startTestRouter({ replicas: [{ name: 'drift-check', host: '127.0.0.1', port: 1 }] });
  });
  after(async () => {
    await router?.close();
  });

  it('serves at /docs-json exactly the committed openapi.json', async () => {
    const r = await simRequest(`${router.url}/docs-json`);
    assert.equal(r.status, 200, '/docs-json must answer 200');
    const served = stableJson(JSON.parse(r.body.toString('utf8')) as unknown);
    const committed = readCommitted();
    assert.ok(served === committed, `the app's OpenAPI document differs from openapi.json: ${FIX}.\n${firstDifference(served, committed)}`);
  });

  it('is reproduced byte for byte by the write-openapi script', async () => {
    const dir = tempDir('ar-openapi-');
    const out = join(dir, 'openapi.json');
    const run = await runNode(WRITER, [out], 60_000);
    assert.equal(run.code, 0, `write-openapi failed: ${run.stderr}`);
    const written = readFileSync(out, 'utf8');
    const committed = readCommitted();
    assert.ok(written === committed, `write-openapi output differs from openapi.json: ${FIX}.\n${firstDifference(written, committed)}`);
  });
});

describe('stableJson', () => {
  it('sorts object keys at every depth, keeps array order, indents by 2 and ends with a newline', () => {
    const a = stableJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } });
    const b = stableJson({ a: { c: null, d: [3, { y: 2, z: 1 }] }, b: 1 });
    assert.equal(a, b);
    assert.equal(a, '{\n  "a": {\n    "c": null,\n    "d": [\n      3,\n      {\n        "y": 2,\n        "z": 1\n      }\n    ]\n  },\n  "b": 1\n}\n');
    assert.notEqual(stableJson([1, 2]), stableJson([2, 1]));
  });
});
