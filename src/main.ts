import 'reflect-metadata';
import { constants } from 'node:os';
import { exitWithConfigError, loadConfigOrExit } from './config/cli.js';
import { ConfigError } from './config/config-error.js';
import type { AppLogger } from './common/logging/logger.js';
import { InternalErrors } from './common/errors/internal-errors.js';
import { installProcessFaultHandlers } from './common/errors/process-faults.js';

/** Bootstrap only: config (exit 2 on any problem), app, signals, listen. */
async function main(): Promise<void> {
  // The one read of the environment: the loader takes the ROUTER_* settings from it (config.sources.ts)
  // and launched replicas inherit the rest.
  const env = process.env;
  const argv = process.argv.slice(2);
  const config = loadConfigOrExit(argv, env);
  // Nest is loaded only once the config is valid, so a bad config exits 2 at once.
  const { startRouter } = await import('./app.factory.js');
  const { ShutdownService } = await import('./modules/lifecycle/shutdown.service.js');
  // Signals are taken from the first moment: replicas are launched (and adopted) during
  // start-up, so a Ctrl-C then must not kill the router with the default action and leave them
  // running. The first signal drains, at once or as soon as the app is up; a second one is the
  // operator insisting (a second Ctrl-C) and exits now, as a shell expects (128 + signal number),
  // without stopping anything more. Launched replicas not stopped yet keep running; the state
  // file still lists them, so a start with the same --state-file adopts them.
  let first: NodeJS.Signals | undefined;
  let up: { drain: (sig: NodeJS.Signals) => void; log: AppLogger } | undefined;
  // An unhandled rejection is logged, counted and survived; an uncaught exception exits 1 for the
  // supervisor to restart the router (the reasons: common/errors/process-faults.ts).
  const internalErrors = new InternalErrors();
  installProcessFaultHandlers({
    errors: internalErrors,
    log: () => up?.log,
    stderr: (line) => process.stderr.write(line + '\n'),
    exit: (code) => process.exit(code),
  });
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.on(sig, () => {
      if (first !== undefined) {
        const msg = `received ${sig} again: exiting now without finishing the drain; replicas not stopped yet keep running`;
        if (up !== undefined) up.log.warn({ event: 'shutdown_forced', signal: sig }, msg);
        else process.stderr.write(msg + '\n');
        process.exit(128 + constants.signals[sig]);
      }
      first = sig;
      if (up !== undefined) up.drain(sig);
      else process.stderr.write(`received ${sig} during start-up: draining as soon as the router is up (send it again to exit at once)\n`);
    });
  }
  // SIGHUP re-reads the config (docs/reload.md); before the app is up there is nothing to reload
  // into, and the default action (exit) would drop what start-up launched.
  let reload: (() => void) | undefined;
  process.on('SIGHUP', () => {
    if (first !== undefined) process.stderr.write(`received SIGHUP while draining after ${first}: ignored\n`);
    else if (reload !== undefined) reload();
    else process.stderr.write('received SIGHUP during start-up: ignored (send it again once the router listens)\n');
  });
  const { app, log } = await startRouter(config, { env, argv, internalErrors });
  const { ReloadService } = await import('./modules/reload/reload.service.js');
  const { processTracing } = await import('./common/tracing/tracing.js');
  const reloads = app.get(ReloadService);
  reload = () => void reloads.reload('sighup').catch((e: unknown) => log.error({ err: e }, 'config reload failed'));
  const shutdown = app.get(ShutdownService);
  up = {
    log,
    drain: (sig) => {
      log.info({ event: 'shutdown', signal: sig }, `received ${sig}: draining (send it again to exit at once)`);
      void shutdown.run(app).then(
        // The spans still batched leave before the exit (a no-op with tracing off).
        () =>
          (processTracing()?.shutdown() ?? Promise.resolve()).then(
            () => process.exit(0),
            () => process.exit(0),
          ),
        (e: unknown) => {
          log.error({ err: e }, 'shutdown failed');
          process.exit(1);
        },
      );
    },
  };
  if (first !== undefined) up.drain(first);
}

main().catch((e: unknown) => {
  if (e instanceof ConfigError) exitWithConfigError(e);
  process.stderr.write(`fatal: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
