/**
 * Entry point of the replica simulator: `node dist/sim/replica.js --port P [flags]`.
 *
 * Prints exactly one JSON line to stdout once it listens (or, with `--fault-refuse`, once it is
 * ready to listen on its fixed port):
 * `{"event":"listening","name":"<name>","port":<port>,"pid":<pid>}`.
 * Exit codes: 0 after SIGTERM/SIGINT, 2 for invalid flags, 1 when it cannot start.
 * SIGUSR2 toggles the `refuse` fault.
 */
import { parseSimArgs, SimArgsError, simUsage, type SimOptions } from './sim-options.js';
import { startSimServer, type SimServer } from './sim-server.js';

const SHUTDOWN_GRACE_MS = 2_000;

function startupLog(opts: SimOptions, line: string): void {
  if (opts.showStartupLogs) process.stdout.write(`INFO sim: ${line}\n`);
}

function parseOrExit(argv: readonly string[]): SimOptions {
  try {
    return parseSimArgs(argv);
  } catch (err: unknown) {
    if (!(err instanceof SimArgsError)) throw err;
    process.stderr.write(`error: ${err.message}\n(run with --help for the list of flags)\n`);
    process.exit(2);
  }
}

function installSignals(server: SimServer): void {
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    setTimeout(() => process.exit(0), SHUTDOWN_GRACE_MS).unref();
    server.close().then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('SIGUSR2', () => server.toggleRefuse());
}

async function main(): Promise<void> {
  const opts = parseOrExit(process.argv.slice(2));
  if (opts.help) {
    process.stdout.write(simUsage());
    return;
  }
  const model = opts.servedModelName ?? opts.model;
  startupLog(opts, `starting replica simulator (model=${model}, devices=${opts.devices ?? 'none'}, pid=${process.pid})`);
  startupLog(opts, `kv cache: ${opts.kvBlocks} blocks of ${opts.blockSize} tokens`);
  if (opts.startupDelayMs > 0) startupLog(opts, `loading model (${opts.startupDelayMs / 1000} s)...`);
  // Signals during the startup delay still end the process cleanly.
  const early = (): void => process.exit(0);
  process.once('SIGTERM', early);
  process.once('SIGINT', early);
  let server: SimServer;
  try {
    server = await startSimServer(opts);
  } catch (err: unknown) {
    const reason = err instanceof Error ? err.message : String(err);
    process.stderr.write(`error: cannot start the simulator on ${opts.host}:${opts.port}: ${reason}\n`);
    process.exit(1);
  }
  process.off('SIGTERM', early);
  process.off('SIGINT', early);
  installSignals(server);
  const scheme = server.scheme;
  const state = server.faults().refuse ? 'refusing connections until SIGUSR2' : 'running';
  startupLog(opts, `${server.name} ${state} on ${scheme}://${opts.host}:${server.port} (Press CTRL+C to quit)`);
  process.stdout.write(`${JSON.stringify({ event: 'listening', name: server.name, port: server.port, pid: process.pid })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
