/**
 * What a config reload (SIGHUP, `POST /admin/reload`) changes: the running configuration is
 * compared with a freshly loaded one, setting by setting. Settings read at each use (routing
 * decisions, probes, admission, timeouts, autoscale values) are applied for what comes next;
 * the fleet's parts (static replicas, hosts and their slots) are returned as lists for the fleet
 * to act on; settings fixed at start (the listener, the state file, Redis, workers, the session
 * directory's shape, body budgets, logging, the admin token) are only named as needing a restart.
 * Pure: docs/reload.md describes the result for operators.
 */
import { isDeepStrictEqual } from 'node:util';
import type { RouterConfig, RouterConfigFields, SlotSpec, StaticReplicaSpec } from './router-config.js';

/** Fields applied by a reload, and the name each is reported by (a flag or a config-file path). */
const LIVE: ReadonlyArray<readonly [keyof RouterConfigFields, string]> = [
  ['health', 'health'],
  ['requestTimeoutMs', '--request-timeout'],
  ['streamIdleTimeoutMs', '--stream-idle-timeout'],
  ['connectTimeoutMs', '--connect-timeout'],
  ['modelsTimeoutMs', '--models-timeout'],
  ['launchTimeoutMs', '--launch-timeout'],
  ['drainTimeoutMs', '--drain-timeout'],
  ['stopGraceMs', '--stop-grace'],
  ['queueTimeoutMs', '--queue-timeout'],
  ['queueMax', '--queue-max'],
  ['maxReplicas', '--max-replicas'],
];

/** Fields only a restart applies. */
const RESTART: ReadonlyArray<readonly [keyof RouterConfigFields, string]> = [
  ['listenHost', '--host'],
  ['listenPort', '--port'],
  ['workers', '--workers'],
  ['stateFile', '--state-file'],
  ['discardState', '--discard-state'],
  ['redisUrl', '--redis-url'],
  ['redisPrefix', '--redis-prefix'],
  ['advertiseUrl', '--advertise-url'],
  ['leaseTtlMs', '--lease-ttl'],
  ['maxBodyBytes', '--max-body'],
  ['bodyMemoryBytes', '--body-memory'],
  ['headerTimeoutMs', '--header-timeout'],
  ['bodyTimeoutMs', '--body-timeout'],
  ['modelsRefreshMs', '--models-refresh'],
  ['modelsMaxBytes', '--models-max-bytes'],
  ['modelsGraceMs', '--models-grace'],
  ['logLevel', '--log-level'],
  ['logFormat', '--log-format'],
  ['adminToken', 'admin token'],
  ['adminOpen', '--admin-open'],
];

/** Routing settings applied by a reload (read at each decision); the others shape tables built at start. */
const LIVE_ROUTING: ReadonlyArray<readonly [keyof RouterConfig['routing'], string]> = [
  ['policy', '--routing-policy'],
  ['affinitySlack', 'routing.affinity_slack'],
  ['sessionHeader', 'routing.session_header'],
  ['bodyField', 'routing.body_field'],
  ['sessionTtlMs', 'routing.session_ttl'],
];

const RESTART_ROUTING: ReadonlyArray<readonly [keyof RouterConfig['routing'], string]> = [
  ['maxSessions', 'routing.max_sessions'],
  ['prefixAffinity', 'routing.prefix_affinity'],
  ['prefixBlocks', 'routing.prefix_blocks'],
  ['speedAware', 'routing.speed_aware'],
  ['warmHandoff', 'routing.warm_handoff'],
];

/** What a reload does, computed before anything changes. */
export interface ReloadPlan {
  /** Names of the settings that change now (`routing.affinity_slack`, `--queue-max`, `replicas`, `hosts`). */
  readonly changed: readonly string[];
  /** Names of the settings that differ but keep their running value until a restart. */
  readonly restartRequired: readonly string[];
  /** The fields to assign to the running config (RouterConfig.update). */
  readonly fields: Partial<RouterConfigFields>;
  /** Static replicas new in the file. */
  readonly addedReplicas: readonly StaticReplicaSpec[];
  /** Static replicas gone from the file (drained, never stopped). */
  readonly removedReplicas: readonly string[];
  /** Static replicas whose entry changed: drained under the old entry, then added under the new one. */
  readonly replacedReplicas: readonly StaticReplicaSpec[];
  /** Slots new in the file (launchable now). */
  readonly addedSlots: readonly string[];
  /** Slots gone or changed (address, port, devices): a replica in one is drained and stopped. */
  readonly removedSlots: readonly string[];
}

function byName<T extends { readonly name: string }>(list: readonly T[]): Map<string, T> {
  return new Map(list.map((x) => [x.name, x]));
}

/** Compares the running config with `next` (both validated); changes nothing. */
export function planReload(current: RouterConfig, next: RouterConfig): ReloadPlan {
  const changed: string[] = [];
  const restartRequired: string[] = [];
  const fields: Partial<Record<keyof RouterConfigFields, unknown>> = {};
  for (const [key, name] of LIVE) {
    if (isDeepStrictEqual(current[key], next[key])) continue;
    changed.push(name);
    fields[key] = next[key];
  }
  for (const [key, name] of RESTART) if (!isDeepStrictEqual(current[key], next[key])) restartRequired.push(name);

  // Routing: the live settings are taken into a copy of the running ones.
  let routing = current.routing;
  for (const [key, name] of LIVE_ROUTING) {
    if (current.routing[key] === next.routing[key]) continue;
    changed.push(name);
    routing = { ...routing, [key]: next.routing[key] };
  }
  for (const [key, name] of RESTART_ROUTING) if (current.routing[key] !== next.routing[key]) restartRequired.push(name);
  if (routing !== current.routing) fields.routing = routing;

  // Autoscale values change live; turning it on or off needs a restart (its job and pools are set up at start).
  if ((current.autoscale === undefined) !== (next.autoscale === undefined)) restartRequired.push('autoscale');
  else if (!isDeepStrictEqual(current.autoscale, next.autoscale)) {
    changed.push('autoscale');
    fields.autoscale = next.autoscale;
  }

  const was = byName(current.replicas);
  const now = byName(next.replicas);
  const addedReplicas = next.replicas.filter((s) => !was.has(s.name));
  const removedReplicas = current.replicas.filter((s) => !now.has(s.name)).map((s) => s.name);
  const replacedReplicas = next.replicas.filter((s) => was.has(s.name) && !isDeepStrictEqual(was.get(s.name), s));
  if (addedReplicas.length + removedReplicas.length + replacedReplicas.length > 0) {
    changed.push('replicas');
    fields.replicas = next.replicas;
  }

  const oldSlots = byName<SlotSpec>(current.slots);
  const newSlots = byName<SlotSpec>(next.slots);
  const same = (s: SlotSpec): boolean => isDeepStrictEqual(newSlots.get(s.name), s);
  const addedSlots = next.slots.filter((s) => !isDeepStrictEqual(oldSlots.get(s.name), s)).map((s) => s.name);
  const removedSlots = current.slots.filter((s) => !same(s)).map((s) => s.name);
  if (!isDeepStrictEqual(current.hosts, next.hosts) || addedSlots.length + removedSlots.length > 0) {
    changed.push('hosts');
    fields.hosts = next.hosts;
    fields.slots = next.slots;
  }
  return {
    changed,
    restartRequired,
    fields: fields as Partial<RouterConfigFields>,
    addedReplicas,
    removedReplicas,
    replacedReplicas,
    addedSlots,
    removedSlots,
  };
}
