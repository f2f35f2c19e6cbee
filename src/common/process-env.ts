/** Injection token: the router's own environment (launched replicas inherit it minus ROUTER_*). */
export const PROCESS_ENV = Symbol('PROCESS_ENV');

export type ProcessEnv = Readonly<Record<string, string | undefined>>;
