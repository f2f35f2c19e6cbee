import { spawnSim, type SimProcess } from './sim-process.js';

/** A static replica entry of the router's config. */
export interface StaticReplica {
  readonly name: string;
  readonly host: string;
  readonly port: number;
}

/** Simulators r0 and r1, and r2 `slowdown` times slower (contract §4.2 tests), with their static replica entries. */
export async function spawnOneSlow(args: readonly string[], slowdown = 4): Promise<{ sims: SimProcess[]; replicas: StaticReplica[] }> {
  const sims = await Promise.all([
    spawnSim({ name: 'r0', args: [...args] }),
    spawnSim({ name: 'r1', args: [...args] }),
    spawnSim({ name: 'r2', args: [...args, '--slowdown', String(slowdown)] }),
  ]);
  return { sims, replicas: sims.map((s) => ({ name: s.name, host: '127.0.0.1', port: s.port })) };
}
