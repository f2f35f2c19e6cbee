/**
 * Problems found while loading the configuration, and how they are reported.
 * The loader collects every problem it can find and throws them together in one `ConfigError`;
 * cli.ts prints them (one `error: <path>: <message>` line each) and exits 2.
 */

/** One thing wrong with the configuration. */
export interface ConfigProblem {
  /**
   * Where: a JSON path into the config file (`hosts[1].devices_per_replica`, `routing.session_ttl`),
   * a flag (`--request-timeout`), an environment variable (`ROUTER_PORT`), or `config` for the
   * file as a whole.
   */
  readonly path: string;
  /** What is wrong, naming the offending value (never a secret). One line. */
  readonly message: string;
}

/** Thrown by `loadRouterConfig` with every problem found (never just the first). */
export class ConfigError extends Error {
  constructor(readonly problems: readonly ConfigProblem[]) {
    super(`invalid configuration:\n${formatConfigProblems(problems)}`);
    this.name = 'ConfigError';
  }
}

/** Renders problems as `error: <path>: <message>` lines joined by `\n` (no trailing newline). */
export function formatConfigProblems(problems: readonly ConfigProblem[]): string {
  return problems.map((p) => `error: ${p.path}: ${oneLine(p.message)}`).join('\n');
}

/**
 * Shows a config value inside a message: strings JSON-quoted (so blanks, quotes and newlines are
 * visible), long values shortened, `undefined` as `nothing`.
 */
export function showValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  let text: string | undefined;
  try {
    text = typeof value === 'number' && !Number.isFinite(value) ? String(value) : JSON.stringify(value);
  } catch {
    // A cyclic object or a bigint; nothing a JSON or YAML config can hold.
  }
  text ??= plainText(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** What JSON.stringify cannot show (a function, symbol, bigint or cyclic object), named by its type. */
function plainText(value: unknown): string {
  switch (typeof value) {
    case 'bigint':
    case 'boolean':
    case 'number':
      return String(value);
    case 'string':
      return value;
    case 'symbol':
      return value.toString();
    case 'undefined':
      return 'undefined';
    case 'function':
      return 'a function';
    default:
      return 'an object that is not JSON';
  }
}

/** Formats an object key as a path step: `.name` for identifier-like keys, `["a b"]` otherwise. */
export function pathStep(key: string | number): string {
  if (typeof key === 'number') return `[${key}]`;
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/** Joins a parent path and a key (`hosts[0]` + `env` → `hosts[0].env`; `''` + `hosts` → `hosts`). */
export function childPath(parent: string, key: string | number): string {
  const step = pathStep(key);
  return parent === '' && step.startsWith('.') ? step.slice(1) : `${parent}${step}`;
}

function oneLine(message: string): string {
  return message.replace(/\s*[\r\n]+\s*/g, ' ').trim();
}
