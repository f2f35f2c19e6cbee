/**
 * The one typed, validated configuration object the whole app is built from.
 * Produced by `loadRouterConfig` (config.loader.ts) from flags > ROUTER_* env > file > defaults,
 * and injected everywhere under the `RouterConfig` class token.
 * All durations are milliseconds; all names are already defaulted and checked for uniqueness.
 */

export type Scheme = 'http' | 'https';

/** Engines whose Prometheus metric names the router knows (`engine` of a replica or host). */
export const ENGINES = ['vllm', 'sglang', 'llamacpp'] as const;
export type EngineKind = (typeof ENGINES)[number];

/**
 * Read the replica's own load from its Prometheus endpoint (`engine` and/or `metrics_path`):
 * `engine` names the metric set, `any` (only `metrics_path` given) takes whichever known set it finds.
 */
export interface EngineMetricsSpec {
  readonly path: string;
  readonly engine: EngineKind | 'any';
}

/** A replica that is already running; routed to, never stopped. */
export interface StaticReplicaSpec {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly scheme: Scheme;
  /** PEM file of the CA that signed the replica's certificate (https only). */
  readonly caFile?: string;
  /** Verify the replica's certificate (https only). Default true. */
  readonly tlsVerify: boolean;
  /** Admission cap: requests in flight beyond it wait in the router's queue (contract §3). */
  readonly maxInflight?: number;
  /** Models it serves, declared (contract §4.3): no discovery then. */
  readonly models?: readonly string[];
  readonly engineMetrics?: EngineMetricsSpec;
}

/** A machine the router may launch replicas on (`ssh` null = this machine). */
export interface HostSpec {
  readonly name: string;
  readonly ssh: string | null;
  readonly sshPort: number;
  readonly identityFile?: string;
  readonly knownHosts?: string;
  readonly insecureAcceptHostKey: boolean;
  readonly devices: readonly number[];
  readonly devicesPerReplica: number;
  readonly portBase: number;
  readonly model?: string;
  readonly servedModelName?: string;
  readonly serveArgs: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly command?: readonly string[];
  readonly launchWrapper?: readonly string[];
  readonly stopCommand?: readonly string[];
  readonly python: string;
  readonly workdir?: string;
  readonly logDir: string;
  /** Admission cap of each replica launched here (contract §3). */
  readonly maxInflight?: number;
  /** Engine metrics of each replica launched here. */
  readonly engineMetrics?: EngineMetricsSpec;
}

/** One device group of a host: where one launched replica lives. */
export interface SlotSpec {
  /** `<host>-d<first device>` */
  readonly name: string;
  readonly host: string;
  readonly devices: readonly number[];
  readonly port: number;
  /** Address the router dials: 127.0.0.1 for local hosts, the part of `ssh` after `@` otherwise. */
  readonly address: string;
  readonly local: boolean;
}

/** `affinity` is the product; the other two are baselines for the routing-quality benchmark. */
export type RoutingPolicy = 'affinity' | 'round-robin' | 'least-outstanding';

export interface RoutingSettings {
  readonly policy: RoutingPolicy;
  /** Lower-cased header name carrying the session id (default `x-session-id`). */
  readonly sessionHeader: string;
  /** Top-level JSON body field carrying the session id (default `session_id`). */
  readonly bodyField: string;
  readonly affinitySlack: number;
  readonly sessionTtlMs: number;
  readonly maxSessions: number;
  /** Route session-less requests by prompt prefix (contract §4.1). */
  readonly prefixAffinity: boolean;
  /** Cap of the prefix index, in blocks. */
  readonly prefixBlocks: number;
  /** Compare replicas by expected wait from their measured speed (contract §4.2); false = raw in-flight counts. */
  readonly speedAware: boolean;
  /**
   * Warm hand-off (docs/design.md §6.2): a new conversation whose home by in-flight counts is a slower
   * replica is answered by the fastest one while a one-token copy prefills the home, where its
   * later turns go. Needs `speedAware`.
   */
  readonly warmHandoff: boolean;
}

export interface HealthSettings {
  readonly path: string;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly fall: number;
  readonly rise: number;
  /** Between two scrapes of a replica's engine metrics (replicas with `engineMetrics`). */
  readonly metricsIntervalMs: number;
}

/** `autoscale` (contract §6.1), applied to each model pool of launched replicas. */
export interface AutoscaleSettings {
  readonly min: number;
  /** Defaults to the slot capacity; the pool's own slots and --max-replicas bound it further at run time. */
  readonly max: number;
  readonly targetInflight: number;
  readonly intervalMs: number;
  readonly upAfterMs: number;
  readonly downAfterMs: number;
}

export type LogFormat = 'json' | 'pretty';

export interface RouterConfigFields {
  /** Path of the config file (undefined only for the built-in demo). */
  readonly configPath: string | undefined;
  readonly listenHost: string;
  readonly listenPort: number;
  /** Processes relaying `/v1/` traffic (`--workers`, `auto` resolved to the usable cores); 1 = the primary alone. */
  readonly workers: number;
  readonly replicas: readonly StaticReplicaSpec[];
  readonly hosts: readonly HostSpec[];
  /** Every slot of every host, in fill order (local hosts first, then config order). */
  readonly slots: readonly SlotSpec[];
  readonly routing: RoutingSettings;
  readonly health: HealthSettings;
  /** Undefined: no autoscaling (the file has no `autoscale` section). */
  readonly autoscale: AutoscaleSettings | undefined;
  readonly requestTimeoutMs: number;
  readonly streamIdleTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly modelsTimeoutMs: number;
  /** Period of model discovery's refresh of every ready replica (contract §4.3). */
  readonly modelsRefreshMs: number;
  /** Largest model list read from one replica (`--models-max-bytes`). */
  readonly modelsMaxBytes: number;
  /** How long a replica whose list was never readable is a candidate for every model (`--models-grace`). */
  readonly modelsGraceMs: number;
  readonly initialReplicas: number;
  /** Ceiling of the launched pool: min(slot capacity, --max-replicas). */
  readonly maxReplicas: number;
  readonly launchTimeoutMs: number;
  readonly drainTimeoutMs: number;
  /** After a stop: how long the replica has to stop answering before escalation / stop_incomplete. */
  readonly stopGraceMs: number;
  /** Admission: how long a request may wait for a replica with room, and how many may wait. */
  readonly queueTimeoutMs: number;
  readonly queueMax: number;
  readonly stateFile: string | undefined;
  /** Shared Redis (sessions, fleet lease); undefined = single router, everything in memory. */
  readonly redisUrl: string | undefined;
  readonly redisPrefix: string;
  /** How other routers and operators reach this one (leader address in 409 answers). */
  readonly advertiseUrl: string;
  readonly leaseTtlMs: number;
  readonly discardState: boolean;
  readonly maxBodyBytes: number;
  /** Request-body bytes the data plane holds at once, router-wide (`--body-memory`). */
  readonly bodyMemoryBytes: number;
  /** Client must send the request headers within this (Node's headersTimeout). */
  readonly headerTimeoutMs: number;
  /** Client must send the whole request within this (Node's requestTimeout). */
  readonly bodyTimeoutMs: number;
  readonly logLevel: string;
  readonly logFormat: LogFormat;
  /** Bearer token for the admin API; undefined = none configured. */
  readonly adminToken: string | undefined;
  readonly adminOpen: boolean;
  /** Warnings produced while loading (e.g. `--admin-token` on argv), logged at start. */
  readonly warnings: readonly string[];
}

/**
 * Injection token and value: the validated configuration. The class is the token (a constructor
 * parameter typed RouterConfig resolves to it through the decorator metadata, which a type alias
 * would not give); the interface of the same name gives it the fields, all set by the constructor.
 */
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging -- the DI token above; the constructor assigns every field the interface declares
export class RouterConfig {
  constructor(fields: RouterConfigFields) {
    Object.assign(this, fields);
  }

  /**
   * A config reload's one write (config-reload.ts decides which fields): every holder of this
   * instance reads the new values at their next use.
   */
  update(fields: Partial<RouterConfigFields>): void {
    Object.assign(this, fields);
  }
}
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging, @typescript-eslint/no-empty-object-type -- the fields of the class above (declaration merging)
export interface RouterConfig extends RouterConfigFields {}
