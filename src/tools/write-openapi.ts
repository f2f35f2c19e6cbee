/**
 * Writes the admin API's OpenAPI document to a file (`npm run openapi` → `openapi.json`), so the
 * document is committed and reviewed with the code. The drift test (`test/e2e/openapi.test.ts`)
 * fails when the running app's `/docs-json` differs from the committed file.
 *
 *   node dist/tools/write-openapi.js [OUT]     (default OUT: openapi.json, relative to the cwd)
 *
 * The app is built from a fixed in-memory config (one static replica on 127.0.0.1:1) and is never
 * initialised nor listening: no probes, no launches, no port. Nothing in the document depends on
 * the config, the clock or the environment, so two runs give the same bytes.
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Writable } from 'node:stream';
import { buildOpenApiDocument, createApp } from '../app.factory.js';
import { loadRouterConfig } from '../config/config.loader.js';
import { stableJson } from './openapi-json.js';

/** The config the document is generated with: the smallest valid one. */
const DOC_CONFIG = { replicas: [{ name: 'openapi', host: '127.0.0.1', port: 1 }] };

/** Builds the app without listening and returns the OpenAPI document as deterministic JSON text. */
async function renderOpenApiJson(): Promise<string> {
  const config = loadRouterConfig(['--config', 'openapi-doc.json'], {}, { readFile: () => JSON.stringify(DOC_CONFIG) });
  const discard = new Writable({
    write(_chunk: unknown, _enc: BufferEncoding, done: (e?: Error | null) => void): void {
      done();
    },
  });
  const app = await createApp(config, { logStream: discard, env: {} });
  try {
    return stableJson(buildOpenApiDocument(app));
  } finally {
    await app.close();
  }
}

async function main(): Promise<void> {
  const out = resolve(process.argv[2] ?? 'openapi.json');
  const text = await renderOpenApiJson();
  writeFileSync(out, text);
  const paths = Object.keys((JSON.parse(text) as { paths?: Record<string, unknown> }).paths ?? {}).length;
  process.stdout.write(`wrote ${out} (${paths} paths, ${text.length} bytes)\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`write-openapi: cannot write the OpenAPI document: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
