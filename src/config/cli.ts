/**
 * The start-up entry to configuration, called by main.ts before Nest starts: `--help` prints the
 * usage and exits 0; an invalid configuration prints one `error: <path>: <message>` line per
 * problem on stderr and exits 2 (before anything listens).
 */
import { writeSync } from 'node:fs';
import { ConfigError, formatConfigProblems } from './config-error.js';
import { loadRouterConfig, type LoadOptions } from './config.loader.js';
import type { Env } from './config.sources.js';
import { formatUsage, parseArgv } from './flags.js';
import type { RouterConfig } from './router-config.js';

/** Exit code for invalid flags, config or state file (contract §1). */
export const CONFIG_EXIT_CODE = 2;

/**
 * Loads the configuration or ends the process: usage on stdout + exit 0 for `--help`/`-h`,
 * problems on stderr + exit 2 for a `ConfigError`. Other errors propagate (exit 1 by main).
 * `argv` excludes node and the script (`process.argv.slice(2)`); `env` is `process.env`.
 */
export function loadConfigOrExit(argv: readonly string[], env: Env, opts: LoadOptions = {}): RouterConfig {
  if (parseArgv(argv).help) {
    writeSync(1, formatUsage());
    process.exit(0);
  }
  try {
    return loadRouterConfig(argv, env, { isTty: process.stdout.isTTY === true, ...opts });
  } catch (error) {
    if (error instanceof ConfigError) exitWithConfigError(error);
    throw error;
  }
}

/**
 * Prints the problems, one `error: <path>: <message>` line each, on stderr and exits 2. Also used
 * by main.ts for a `ConfigError` raised during start-up (an invalid state file).
 */
export function exitWithConfigError(error: ConfigError): never {
  // writeSync: the lines must be out before exit, whatever stderr is (pipe, file, tty).
  writeSync(2, `${formatConfigProblems(error.problems)}\n`);
  process.exit(CONFIG_EXIT_CODE);
}
