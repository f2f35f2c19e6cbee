/** Injection token: the router's own environment (launched replicas inherit it minus ROUTER_*). */
export const PROCESS_ENV = Symbol('PROCESS_ENV');

export type ProcessEnv = Readonly<Record<string, string | undefined>>;

/** Injection token: where the config came from (a reload reads them again). */
export const CONFIG_SOURCE = Symbol('CONFIG_SOURCE');

/** The command line (without node and the script) and the environment the config was loaded from. */
export interface ConfigSource {
  readonly argv: readonly string[];
  readonly env: ProcessEnv;
}
