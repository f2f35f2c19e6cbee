import 'reflect-metadata';
import { loadConfigOrExit } from './config/cli.js';
import { startRouter } from './app.factory.js';
import { ShutdownService } from './modules/lifecycle/shutdown.service.js';

/** Bootstrap only: config (exit 2 on any problem), app, signals, listen. */
async function main(): Promise<void> {
  const config = loadConfigOrExit(process.argv.slice(2), process.env);
  const { app, log } = await startRouter(config);
  const shutdown = app.get(ShutdownService);
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.once(sig, () => {
      log.info({ event: 'shutdown', signal: sig }, `received ${sig}: draining`);
      void shutdown.run(app).then(
        () => process.exit(0),
        (e: unknown) => {
          log.error({ err: e }, 'shutdown failed');
          process.exit(1);
        },
      );
    });
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`fatal: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
