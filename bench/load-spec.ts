/** What a closed-loop run is asked to do and what it measured; shared by bench/load.ts and its two drivers (wrk, autocannon). */

/** What one closed-loop run measured. Latencies in milliseconds. */
export interface LoadResult {
  tool: 'wrk' | 'autocannon';
  connections: number;
  durationS: number;
  requests: number;
  rps: number;
  meanMs: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Socket errors: connect, read, write, timeouts. */
  errors: number;
  /** Responses with a status outside 2xx (wrk: ≥ 400). */
  non2xx: number;
}

/** One closed-loop run. */
export interface LoadSpec {
  /** Base URL, e.g. `http://127.0.0.1:8000`. */
  url: string;
  path: string;
  connections: number;
  durationS: number;
  /** POST bodies, rotated in order. */
  bodies: readonly string[];
  /** Request headers besides `Content-Type: application/json` (bench/ab-builds.ts `--sdk-headers`). */
  headers?: Readonly<Record<string, string>>;
}
