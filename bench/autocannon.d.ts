/**
 * The part of autocannon 9's API the bench uses (the package ships no types). Latencies are in
 * milliseconds and recorded in an integer histogram, i.e. with 1 ms resolution.
 */
declare module 'autocannon' {
  /** One request of the rotation (autocannon cycles through `requests`). */
  export interface AutocannonRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
  }

  export interface AutocannonOptions {
    url: string;
    connections?: number;
    /** Seconds. */
    duration?: number;
    /** Total requests per second over all connections (0 = as fast as possible). */
    overallRate?: number;
    pipelining?: number;
    /** Seconds before a request counts as timed out. */
    timeout?: number;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    requests?: AutocannonRequest[];
  }

  export interface AutocannonHistogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
    p99_9: number;
  }

  export interface AutocannonResult {
    /** Seconds. */
    duration: number;
    latency: AutocannonHistogram;
    requests: AutocannonHistogram & { sent: number };
    throughput: AutocannonHistogram;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
  }

  export interface AutocannonInstance extends PromiseLike<AutocannonResult> {
    stop(): void;
  }

  function autocannon(opts: AutocannonOptions): AutocannonInstance;
  export default autocannon;
}
