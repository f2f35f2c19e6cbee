/**
 * Command-line options of the replica simulator (`node dist/sim/replica.js --port P ...`).
 * Flags take `--flag value` or `--flag=value`; a repeated flag keeps its last value.
 */
import { parseArgs } from 'node:util';
import { applyFaultsPatch, noFaults, SimFaultsError, type SimFaults } from './sim-faults.js';

/** Everything the simulator is configured with. */
export interface SimOptions {
  /** Port to listen on; 0 = ephemeral. */
  port: number;
  host: string;
  /** Identity reported in `X-Replica-Name` and stats; `null` = `sim-<actual port>`. */
  name: string | null;
  model: string;
  servedModelName: string | null;
  /** LoRA adapter names served on top of the model (`--lora a,b`). */
  lora: string[];
  /** Recorded in stats only (pypto-serving's `--devices`). */
  devices: string | null;
  showStartupLogs: boolean;
  /** Time to wait before listening (a loading engine refuses connections). */
  startupDelayMs: number;
  tlsCert: string | null;
  tlsKey: string | null;
  blockSize: number;
  kvBlocks: number;
  ttftBaseMs: number;
  prefillMsPerToken: number;
  itlMs: number;
  /** Each stream gap is drawn uniformly from `itlMs ± itlJitterMs` (0 = every gap is `itlMs`). */
  itlJitterMs: number;
  /** `--slowdown F`: the four timings above were multiplied by F (a replica F times slower). */
  slowdown: number;
  /** Completion length when the body has no `max_tokens` / `max_completion_tokens`. */
  outputTokens: number;
  /** Concurrent requests being generated; 0 = unlimited. */
  maxRunning: number;
  /** Initial fault switches (`--fault-*`). */
  faults: SimFaults;
  /** `--help` was given. */
  help: boolean;
}

/** Thrown for an unknown flag, a missing value or an invalid value; the message names the flag. */
export class SimArgsError extends Error {
  override readonly name = 'SimArgsError';
}

/** The defaults, as documented in contract §10 and `--help`. */
export function defaultSimOptions(): SimOptions {
  return {
    port: 8001,
    host: '127.0.0.1',
    name: null,
    model: 'sim-model',
    servedModelName: null,
    lora: [],
    devices: null,
    showStartupLogs: false,
    startupDelayMs: 0,
    tlsCert: null,
    tlsKey: null,
    blockSize: 16,
    kvBlocks: 4096,
    ttftBaseMs: 0,
    prefillMsPerToken: 0,
    itlMs: 0,
    itlJitterMs: 0,
    slowdown: 1,
    outputTokens: 16,
    maxRunning: 0,
    faults: noFaults(),
    help: false,
  };
}

type Apply = (o: SimOptions, v: string, flag: string) => void;
interface FlagSpec {
  readonly value: boolean;
  readonly help: string;
  readonly apply: Apply;
}

function int(flag: string, v: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = /^-?\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in ${min}..${max}`;
    throw new SimArgsError(`${flag}: "${v}" is not an integer ${range}`);
  }
  return n;
}

function num(flag: string, v: string, min: number, exclusive = false): number {
  const n = v.trim() === '' ? NaN : Number(v);
  if (!Number.isFinite(n) || n < min || (exclusive && n === min)) {
    throw new SimArgsError(`${flag}: "${v}" is not a number ${exclusive ? '>' : '>='} ${min}`);
  }
  return n;
}

/** `a,b`: non-empty, distinct names. */
function names(flag: string, v: string): string[] {
  const list = v.split(',').map((x) => x.trim());
  if (list.some((x) => x === '')) throw new SimArgsError(`${flag}: "${v}" is not a comma-separated list of names (an entry is empty)`);
  const dup = list.find((x, i) => list.indexOf(x) !== i);
  if (dup !== undefined) throw new SimArgsError(`${flag}: "${dup}" is listed twice`);
  return list;
}

function nonEmpty(flag: string, v: string): string {
  if (v === '') throw new SimArgsError(`${flag}: must not be empty`);
  return v;
}

function fault(patch: Record<string, unknown>): (o: SimOptions, flag: string) => void {
  return (o, flag) => {
    try {
      o.faults = applyFaultsPatch(o.faults, patch);
    } catch (err: unknown) {
      if (err instanceof SimFaultsError) throw new SimArgsError(`${flag}: ${err.message}`);
      throw err;
    }
  };
}

const v = (help: string, apply: Apply): FlagSpec => ({ value: true, help, apply });
const b = (help: string, apply: (o: SimOptions) => void): FlagSpec => ({ value: false, help, apply });

const FLAGS: Readonly<Record<string, FlagSpec>> = {
  port: v('PORT  port to listen on, 0 = ephemeral (8001)', (o, x, f) => (o.port = int(f, x, 0, 65535))),
  host: v('HOST  address to bind (127.0.0.1)', (o, x, f) => (o.host = nonEmpty(f, x))),
  name: v('NAME  identity in X-Replica-Name and stats (sim-<port>)', (o, x, f) => (o.name = nonEmpty(f, x))),
  model: v('MODEL  model id (sim-model)', (o, x, f) => (o.model = nonEmpty(f, x))),
  'served-model-name': v('NAME  model id reported to clients', (o, x, f) => (o.servedModelName = nonEmpty(f, x))),
  lora: v('A,B  LoRA adapters served on top of the model, listed with parent (none)', (o, x, f) => (o.lora = names(f, x))),
  devices: v('LIST  accepted and recorded in stats', (o, x) => (o.devices = x)),
  'show-startup-logs': b('print engine-like startup lines to stdout', (o) => (o.showStartupLogs = true)),
  'startup-delay': v('S  seconds to wait before listening (0)', (o, x, f) => (o.startupDelayMs = num(f, x, 0) * 1000)),
  'tls-cert': v('FILE  PEM certificate: serve https (needs --tls-key)', (o, x, f) => (o.tlsCert = nonEmpty(f, x))),
  'tls-key': v('FILE  PEM private key for --tls-cert', (o, x, f) => (o.tlsKey = nonEmpty(f, x))),
  'block-size': v('N  tokens per KV block (16)', (o, x, f) => (o.blockSize = int(f, x, 1))),
  'kv-blocks': v('N  KV blocks held in the LRU (4096)', (o, x, f) => (o.kvBlocks = int(f, x, 1))),
  'ttft-base-ms': v('MS  fixed time to first token (0)', (o, x, f) => (o.ttftBaseMs = num(f, x, 0))),
  'prefill-ms-per-token': v('MS  TTFT per uncached prompt token (0)', (o, x, f) => (o.prefillMsPerToken = num(f, x, 0))),
  'itl-ms': v('MS  gap between stream chunks (0)', (o, x, f) => (o.itlMs = num(f, x, 0))),
  'itl-jitter-ms': v('MS  each gap drawn uniformly from --itl-ms ± MS, at most --itl-ms (0)', (o, x, f) => (o.itlJitterMs = num(f, x, 0))),
  slowdown: v('F  multiply the four timings above by F: a replica F times slower, e.g. 4 (1)', (o, x, f) => (o.slowdown = num(f, x, 0, true))),
  'output-tokens': v('N  completion length without max_tokens (16)', (o, x, f) => (o.outputTokens = int(f, x, 1))),
  'max-running': v('N  requests generated at once, 0 = unlimited (0)', (o, x, f) => (o.maxRunning = int(f, x, 0))),
  'fault-status': v('CODE  answer /v1 with this status', (o, x, f) => fault({ status: int(f, x, 400, 599) })(o, f)),
  'fault-hang': v('headers|body  never answer / stall mid-body', (o, x, f) => fault({ hang: x })(o, f)),
  'fault-die-after-chunks': v('N  exit(1) after N chunks', (o, x, f) => fault({ die_after_chunks: int(f, x, 0) })(o, f)),
  'fault-reset-after-chunks': v('N  destroy the socket after N chunks', (o, x, f) => fault({ reset_after_chunks: int(f, x, 0) })(o, f)),
  'fault-slow-ms': v('MS  extra delay before every chunk/answer', (o, x, f) => fault({ slow_ms: num(f, x, 0) })(o, f)),
  'fault-health': v('ok|not_ready  what /health reports', (o, x, f) => fault({ health: x })(o, f)),
  'fault-refuse': b('do not listen until SIGUSR2 (needs an explicit --port)', (o) => fault({ refuse: true })(o, '--fault-refuse')),
  'fault-refuse-ms': v('MS  with --fault-refuse: listen after MS', (o, x, f) => fault({ refuse_ms: num(f, x, 0, true) })(o, f)),
  help: b('print this help', (o) => (o.help = true)),
};

const FLAGS_BY_NAME: ReadonlyMap<string, FlagSpec> = new Map(Object.entries(FLAGS));

/** Usage text listing every flag. */
export function simUsage(): string {
  const lines = Object.entries(FLAGS).map(([name, spec]) => `  --${name} ${spec.help}`);
  return `usage: node dist/sim/replica.js [flags]\n${lines.join('\n')}\n`;
}

/** `parseArgs` options: a flag with a value is a string, the others booleans. */
const PARSE_OPTIONS = Object.fromEntries(Object.entries(FLAGS).map(([name, spec]) => [name, { type: spec.value ? 'string' : 'boolean' } as const]));

/**
 * Parses the simulator's argv (without `node` and the script). `node:util` `parseArgs` splits the
 * words into flags and values; it runs non-strict so that the checks, and their messages, are the
 * simulator's own. Throws {@link SimArgsError} naming the flag on an unknown flag, a stray
 * positional argument, a missing or invalid value, `--tls-cert` without `--tls-key` (or vice
 * versa), `--itl-jitter-ms` above `--itl-ms`, or `--fault-refuse` without a non-zero `--port`.
 */
export function parseSimArgs(argv: readonly string[]): SimOptions {
  const { tokens } = parseArgs({ args: [...argv], options: PARSE_OPTIONS, strict: false, allowPositionals: true, tokens: true });
  const opts = defaultSimOptions();
  let portGiven = false;
  for (const t of tokens) {
    if (t.kind === 'positional') throw new SimArgsError(`unexpected argument "${t.value}"`);
    if (t.kind === 'option-terminator') throw new SimArgsError('unknown flag --');
    const flag = t.rawName;
    const spec = flag.startsWith('--') ? FLAGS_BY_NAME.get(t.name) : undefined;
    if (spec === undefined) throw new SimArgsError(`unknown flag ${flag}`);
    if (!spec.value && t.value !== undefined) throw new SimArgsError(`${flag} takes no value`);
    // Non-strict parseArgs takes the next word as the value even when it is the next flag.
    if (spec.value && (t.value === undefined || (!t.inlineValue && t.value.startsWith('--')))) throw new SimArgsError(`${flag} needs a value`);
    spec.apply(opts, t.value ?? '', flag);
    if (flag === '--port') portGiven = true;
  }
  if ((opts.tlsCert === null) !== (opts.tlsKey === null)) {
    throw new SimArgsError('--tls-cert and --tls-key must be given together');
  }
  if (opts.itlJitterMs > opts.itlMs) {
    throw new SimArgsError(`--itl-jitter-ms: ${opts.itlJitterMs} exceeds --itl-ms ${opts.itlMs} (a gap cannot be negative)`);
  }
  // Applied once every flag is read, so `--slowdown 4 --itl-ms 5` and `--itl-ms 5 --slowdown 4` agree.
  opts.ttftBaseMs *= opts.slowdown;
  opts.prefillMsPerToken *= opts.slowdown;
  opts.itlMs *= opts.slowdown;
  opts.itlJitterMs *= opts.slowdown;
  if (opts.faults.refuse && (!portGiven || opts.port === 0)) {
    throw new SimArgsError('--fault-refuse needs an explicit non-zero --port (the port must be known)');
  }
  return opts;
}
