import 'reflect-metadata';
import { constants } from 'node:os';
import { loadConfigOrExit } from './config/cli.js';
import { ConfigError, formatConfigProblems } from './config/config-error.js';

/** Bootstrap only: config (exit 2 on any problem), app, signals, listen. */
async function main(): Promise<void> {
  const config = loadConfigOrExit(process.argv.slice(2), process.env);
  // Nest is loaded only once the config is valid, so a bad config exits 2 at once.
  const { startRouter } = await import('./app.factory.js');
  const { ShutdownService } = await import('./modules/lifecycle/shutdown.service.js');
  // Signals are taken from the first moment: replicas are launched (and adopted) during
  // start-up, so a Ctrl-C then must not kill the router with the default action and leave them
  // running. A first signal before the app is up is held and acted on once it is.
  let stopping = false;
  let drain: ((sig: NodeJS.Signals) => void) | undefined;
  let pending: NodeJS.Signals | undefined;
  let forced: ((sig: NodeJS.Signals, msg: string) => void) | undefined;
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.on(sig, () => {
      if (stopping || pending !== undefined) {
        // A second signal is the operator insisting (a second Ctrl-C): exit now, as a shell
        // expects (128 + signal number), without stopping anything more. Launched replicas not
        // stopped yet keep running; the state file still lists them, so a start with the same
        // --state-file adopts them.
        const msg = `received ${sig} again: exiting now without finishing the drain; replicas not stopped yet keep running`;
        if (forced !== undefined) forced(sig, msg);
        else process.stderr.write(msg + '\n');
        process.exit(128 + constants.signals[sig]);
      }
      if (drain === undefined) {
        pending = sig;
        process.stderr.write(`received ${sig} during start-up: draining as soon as the router is up (send it again to exit at once)\n`);
        return;
      }
      drain(sig);
    });
  }
  const { app, log } = await startRouter(config, { env: process.env });
  const shutdown = app.get(ShutdownService);
  forced = (sig, msg) => log.warn({ event: 'shutdown_forced', signal: sig }, msg);
  drain = (sig) => {
    stopping = true;
    log.info({ event: 'shutdown', signal: sig }, `received ${sig}: draining (send it again to exit at once)`);
    void shutdown.run(app).then(
      () => process.exit(0),
      (e: unknown) => {
        log.error({ err: e }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  if (pending !== undefined) {
    const sig = pending;
    pending = undefined;
    drain(sig);
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
