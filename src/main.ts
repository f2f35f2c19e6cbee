import 'reflect-metadata';
import { loadConfigOrExit } from './config/cli.js';
import { ConfigError, formatConfigProblems } from './config/config-error.js';

/** Bootstrap only: config (exit 2 on any problem), app, signals, listen. */
async function main(): Promise<void> {
  const config = loadConfigOrExit(process.argv.slice(2), process.env);
  // Nest is loaded only once the config is valid, so a bad config exits 2 at once.
  const { startRouter } = await import('./app.factory.js');
  const { ShutdownService } = await import('./modules/lifecycle/shutdown.service.js');
  const { app, log } = await startRouter(config, { env: process.env });
  const shutdown = app.get(ShutdownService);
  let stopping = false;
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    // `on`, not `once`: a second signal during the drain must not kill the router with the
    // default action and leave launched replicas behind.
    process.on(sig, () => {
      if (stopping) {
        log.warn({ event: 'shutdown', signal: sig }, `received ${sig} again: still draining`);
        return;
      }
      stopping = true;
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
  if (e instanceof ConfigError) {
    process.stderr.write(formatConfigProblems(e.problems) + '\n');
    process.exit(2);
  }
  process.stderr.write(`fatal: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
