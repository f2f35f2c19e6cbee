import { SIM_ENTRY, simRequest } from './sim-process.js';
import { parseProm, sum } from './prom.js';
import { tempDir } from '../../src/common/temp-dir.fake.js';

/** A local host whose replicas are simulator processes (config-file shape). */
export function simHost(name: string, devices: number[], portBase: number, simArgs: string[] = [], extra: Record<string, unknown> = {}) {
  return {
    name,
    devices,
    port_base: portBase,
    model: 'sim-model',
    command: [process.execPath, SIM_ENTRY, '--port', '{port}', '--name', '{slot}', '--model', '{model}', '--devices', '{devices}', ...simArgs],
    log_dir: tempDir('ar-fleet-'),
    ...extra,
  };
}

/** The fleet lifecycle counters of `/metrics` (`affinity_router_fleet_events_total{event}`). */
export async function fleetEvents(router: { url: string }): Promise<Record<string, number>> {
  const { samples } = parseProm((await simRequest(`${router.url}/metrics`)).body.toString());
  const events = ['launch', 'stop', 'adoption', 'launch_failure', 'launch_timeout', 'exit'];
  return Object.fromEntries(events.map((event) => [event, sum(samples, 'affinity_router_fleet_events_total', { event })]));
}

/** The state `affinity_router_replica_state` marks 1 for `replica` in `/metrics`, or undefined when it has none. */
export async function replicaState(router: { url: string }, replica: string): Promise<string | undefined> {
  const { samples } = parseProm((await simRequest(`${router.url}/metrics`)).body.toString());
  const on = samples.filter((s) => s.name === 'affinity_router_replica_state' && s.labels['replica'] === replica && s.value === 1);
  if (on.length > 1) throw new Error(`replica ${replica} is in ${on.length} states at once`);
  return on[0]?.labels['state'];
}

/** True once `pid` no longer runs (a zombie counts as gone; see the fake's doc). */
export { processGone as pidGone } from '../../src/modules/launcher/transports/replica-process.fake.js';
