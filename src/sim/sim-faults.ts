/**
 * Fault switches of the replica simulator: the state, and the one validating merge used by the
 * `--fault-*` flags, `POST /__sim/faults` and `SimServer.setFaults`.
 */

/** The fault switches that are currently in effect. `null` / `0` / `false` mean "off". */
export interface SimFaults {
  /** Answer every /v1 request with this HTTP status and an OpenAI error body. */
  status: number | null;
  /** `headers`: never answer; `body`: send headers and part of the body, then stall forever. */
  hang: 'headers' | 'body' | null;
  /** A response writes N chunks (non-stream: half its body), then the whole process exits(1). */
  die_after_chunks: number | null;
  /** A response writes N chunks (non-stream: half its body), then its socket is destroyed. */
  reset_after_chunks: number | null;
  /** Extra delay before every stream chunk and before every non-stream answer. */
  slow_ms: number;
  /** What `GET /health` reports: 200 `ok` or 503 `not_ready`. */
  health: 'ok' | 'not_ready';
  /** Not listening: new connections are refused (SIGUSR2 toggles it). */
  refuse: boolean;
  /** With `refuse`: listen again on the same port after this many milliseconds. */
  refuse_ms: number | null;
  /**
   * Requests `/metrics` reports as waiting on top of the real queue: load that did not come
   * through the router (another router, a batch job), as a router reading engine metrics sees it.
   */
  external_waiting: number;
  /** `GET /metrics` never answers (an engine whose metrics endpoint hangs). */
  metrics_hang: boolean;
  /** What `GET /v1/models` answers: the real list, `garbage` (not JSON), or `huge` (~57 MB of LoRA adapters). */
  models_list: 'ok' | 'garbage' | 'huge';
}

/** A partial update of {@link SimFaults}; `reset: true` first clears every switch. */
export type SimFaultsPatch = Partial<SimFaults> & { reset?: boolean };

/** Thrown when a faults patch names an unknown switch or holds an invalid value. */
export class SimFaultsError extends Error {
  override readonly name = 'SimFaultsError';
}

/** Every switch off. */
export function noFaults(): SimFaults {
  return {
    status: null,
    hang: null,
    die_after_chunks: null,
    reset_after_chunks: null,
    slow_ms: 0,
    health: 'ok',
    refuse: false,
    refuse_ms: null,
    external_waiting: 0,
    metrics_hang: false,
    models_list: 'ok',
  };
}

type Setter = (faults: SimFaults, value: unknown) => void;

function chunkCount(key: string, value: unknown): number | null {
  if (value === null) return null;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
  throw new SimFaultsError(`${key} must be a non-negative integer or null, got ${JSON.stringify(value)}`);
}

const SETTERS: Readonly<Record<keyof SimFaults, Setter>> = {
  status(f, v) {
    if (v === null || v === 0) {
      f.status = null;
      return;
    }
    if (typeof v === 'number' && Number.isInteger(v) && v >= 400 && v <= 599) {
      f.status = v;
      return;
    }
    throw new SimFaultsError(`status must be an integer in 400..599 or null, got ${JSON.stringify(v)}`);
  },
  hang(f, v) {
    if (v === null || v === 'none') f.hang = null;
    else if (v === 'headers' || v === 'body') f.hang = v;
    else throw new SimFaultsError(`hang must be "headers", "body" or null, got ${JSON.stringify(v)}`);
  },
  die_after_chunks(f, v) {
    f.die_after_chunks = chunkCount('die_after_chunks', v);
  },
  reset_after_chunks(f, v) {
    f.reset_after_chunks = chunkCount('reset_after_chunks', v);
  },
  slow_ms(f, v) {
    if (v === null) f.slow_ms = 0;
    else if (typeof v === 'number' && Number.isFinite(v) && v >= 0) f.slow_ms = v;
    else throw new SimFaultsError(`slow_ms must be a non-negative number, got ${JSON.stringify(v)}`);
  },
  health(f, v) {
    if (v === 'ok' || v === 'not_ready') f.health = v;
    else throw new SimFaultsError(`health must be "ok" or "not_ready", got ${JSON.stringify(v)}`);
  },
  refuse(f, v) {
    if (typeof v !== 'boolean') {
      throw new SimFaultsError(`refuse must be a boolean, got ${JSON.stringify(v)}`);
    }
    f.refuse = v;
  },
  models_list(f, v) {
    if (v === 'ok' || v === 'garbage' || v === 'huge') f.models_list = v;
    else throw new SimFaultsError(`models_list must be "ok", "garbage" or "huge", got ${JSON.stringify(v)}`);
  },
  metrics_hang(f, v) {
    if (typeof v !== 'boolean') throw new SimFaultsError(`metrics_hang must be true or false, got ${JSON.stringify(v)}`);
    f.metrics_hang = v;
  },
  external_waiting(f, v) {
    f.external_waiting = chunkCount('external_waiting', v) ?? 0;
  },
  refuse_ms(f, v) {
    if (v === null) f.refuse_ms = null;
    else if (typeof v === 'number' && Number.isFinite(v) && v > 0) f.refuse_ms = v;
    else throw new SimFaultsError(`refuse_ms must be a positive number or null, got ${JSON.stringify(v)}`);
  },
};

function isFaultKey(key: string): key is keyof SimFaults {
  return Object.prototype.hasOwnProperty.call(SETTERS, key);
}

/**
 * Returns `current` updated by `patch` (a parsed JSON value). Validates everything before
 * changing anything: an unknown key or a bad value throws {@link SimFaultsError} naming it.
 */
export function applyFaultsPatch(current: SimFaults, patch: unknown): SimFaults {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) {
    throw new SimFaultsError('faults must be a JSON object');
  }
  const entries = Object.entries(patch);
  let reset = false;
  for (const [key, value] of entries) {
    if (key === 'reset') {
      if (typeof value !== 'boolean') throw new SimFaultsError('reset must be a boolean');
      reset = value;
    } else if (!isFaultKey(key)) {
      throw new SimFaultsError(`unknown fault "${key}" (known: ${Object.keys(SETTERS).join(', ')}, reset)`);
    }
  }
  const next = reset ? noFaults() : { ...current };
  for (const [key, value] of entries) {
    if (isFaultKey(key)) SETTERS[key](next, value);
  }
  return next;
}
