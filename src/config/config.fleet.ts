/**
 * From the validated file to the fleet: replica, host and slot specs with every default filled in,
 * and the rules that span fields and entries (unique names, slots on free ports, `model` unless a
 * `command`, `ca_file` only with https, templates). Pure: the home directory comes in as a mapper.
 */
import { childPath, showValue, type ConfigProblem } from './config-error.js';
import type { ConfigFileDto, HostDto, StaticReplicaDto } from './config.dto.js';
import type { EngineKind, EngineMetricsSpec, HostSpec, SlotSpec, StaticReplicaSpec } from './router-config.js';
import { computeSlots, findSlotProblems } from './slots.js';
import { findHostTemplateProblems } from './templates.js';

/** Maps a path from the file to the one used (`~/` expanded); undefined stays undefined. */
export type PathMapper = (path: string | undefined) => string | undefined;

/** The replicas, hosts and slots of a config file, and what is wrong with them. */
export interface Fleet {
  readonly replicas: StaticReplicaSpec[];
  readonly hosts: HostSpec[];
  readonly slots: SlotSpec[];
  /** Host name → its JSON path (`hosts[2]`). */
  readonly hostPaths: Map<string, string>;
  readonly problems: ConfigProblem[];
  /** False when a replica or host was invalid and left out (so capacity is unknown). */
  readonly complete: boolean;
}

/**
 * Turns the validated file into specs and checks the rules that span fields and entries. Entries
 * with problems (`fileProblems`, from the DTOs) are left out, but their valid fields still take
 * part in the checks that need only those (a bad `model` does not hide a name clash).
 */
export function buildFleet(file: ConfigFileDto | undefined, fileProblems: readonly ConfigProblem[], expandHome: PathMapper, warnings: string[]): Fleet {
  const problems: ConfigProblem[] = [];
  const above = (a: string, b: string): boolean => a === b || b.startsWith(`${a}.`) || b.startsWith(`${a}[`);
  /** A problem at or above `path` (a problem at `hosts` invalidates `hosts[0]`). */
  const bad = (path: string): boolean => fileProblems.some((p) => above(p.path, path));
  /** A problem at, above or anywhere under `path`. */
  const touched = (path: string): boolean => fileProblems.some((p) => above(p.path, path) || above(path, p.path));
  /** The entry without its invalid fields, so the checks that need only valid fields still run. */
  const valid = <T extends object>(dto: T, path: string): Partial<T> =>
    Object.fromEntries(Object.entries(dto).filter(([k]) => !bad(childPath(path, k)))) as Partial<T>;
  const list = <T>(items: T[] | undefined, path: string): T[] => (Array.isArray(items) && !bad(path) ? items : []);

  const hostPaths = new Map<string, string>();
  const hosts: HostSpec[] = [];
  list(file?.hosts, 'hosts').forEach((dto, i) => {
    const path = childPath('hosts', i);
    if (bad(path)) return;
    const ok = valid(dto, path);
    const has = (field: keyof HostDto): boolean => !bad(`${path}.${field}`);
    // Invalid fields are left out or replaced by stand-ins that raise no further problem.
    const host = toHostSpec({ ...ok, devices: ok.devices ?? [], ...(has('model') ? {} : { model: '?' }) }, i, expandHome);
    const own: ConfigProblem[] = [];
    if (has('name')) {
      const clash = hostPaths.get(host.name);
      if (clash !== undefined) own.push({ path: `${path}.name`, message: `${showValue(host.name)} is already the name of ${clash}` });
      hostPaths.set(host.name, path);
    }
    if (has('devices') && has('devices_per_replica') && has('port_base')) own.push(...findSlotProblems(host, path));
    own.push(...findHostTemplateProblems(host, path));
    if (host.model === undefined && host.command === undefined && has('command')) {
      own.push({ path: `${path}.model`, message: 'required unless the host has its own "command"' });
    }
    if (host.command !== undefined && host.serveArgs.length > 0) warnings.push(`${path}.serve_args: ignored because the host has its own "command"`);
    if (host.insecureAcceptHostKey && host.ssh !== null)
      warnings.push(`${path}.insecure_accept_host_key: the ssh host key of ${host.ssh} is accepted without checking`);
    problems.push(...own);
    if (own.length === 0 && !touched(path)) hosts.push(host);
  });

  const slots = computeSlots(hosts);
  const slotAt = new Map<string, SlotSpec>();
  for (const slot of slots) {
    const where = `${slot.address}:${slot.port}`;
    const other = slotAt.get(where);
    if (other !== undefined)
      problems.push({ path: `${hostPaths.get(slot.host)}.port_base`, message: `puts slot ${slot.name} on ${where}, already used by slot ${other.name}` });
    slotAt.set(where, slot);
  }

  const replicaNames = new Map<string, string>(slots.map((s) => [s.name, `a device slot of ${hostPaths.get(s.host)} (${s.host})`]));
  const replicas: StaticReplicaSpec[] = [];
  list(file?.replicas, 'replicas').forEach((dto, i) => {
    const path = childPath('replicas', i);
    if (bad(path)) return;
    const ok = valid(dto, path);
    const has = (field: keyof StaticReplicaDto): boolean => !bad(`${path}.${field}`);
    const replica = toStaticReplicaSpec({ host: '?', port: 0, ...ok }, expandHome);
    const named = dto.name !== undefined && dto.name !== null && dto.name !== '';
    const nameKnown = has('name') && (named || (has('host') && has('port')));
    const clash = nameKnown ? replicaNames.get(replica.name) : undefined;
    if (clash !== undefined)
      problems.push({ path: `${path}.name`, message: `${showValue(replica.name)}${named ? '' : ' (host:port)'} is already the name of ${clash}` });
    if (nameKnown) replicaNames.set(replica.name, path);
    const address = ['localhost', '::1'].includes(replica.host) ? '127.0.0.1' : replica.host;
    const slot = has('host') && has('port') ? slotAt.get(`${address}:${replica.port}`) : undefined;
    if (slot !== undefined) problems.push({ path: `${path}.port`, message: `${replica.port} on ${replica.host} is where slot ${slot.name} listens` });
    if (replica.caFile !== undefined && replica.scheme !== 'https' && has('scheme')) {
      problems.push({ path: `${path}.ca_file`, message: `is only used with "scheme": "https", but this replica uses ${replica.scheme}` });
    }
    if (!touched(path)) replicas.push(replica);
  });
  const complete = file !== undefined && !fileProblems.some((p) => /^(hosts|replicas)\b/.test(p.path)) && problems.length === 0;
  return { replicas, hosts, slots, hostPaths, problems, complete };
}

const isUnset = (v: unknown): v is undefined | null => v === undefined || v === null;
/** Drops undefined values, so optional spec fields are absent rather than undefined. */
const defined = <T extends object>(o: T): Partial<T> => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/** A validated replica entry as a spec: IPv6 brackets dropped, name defaulted to `host:port`. */
function toStaticReplicaSpec(dto: StaticReplicaDto, mapPath: PathMapper): StaticReplicaSpec {
  const host = dto.host.replace(/^\[(.*)\]$/, '$1');
  return {
    name: isUnset(dto.name) ? `${host}:${dto.port}` : dto.name,
    host,
    port: dto.port,
    scheme: dto.scheme ?? 'http',
    tlsVerify: dto.tls_verify ?? true,
    ...defined({
      caFile: mapPath(dto.ca_file ?? undefined),
      maxInflight: dto.max_inflight ?? undefined,
      models: dto.models ?? undefined,
      engineMetrics: engineMetrics(dto),
    }),
  };
}

/** `engine` and/or `metrics_path` turn engine metrics on (default path `/metrics`, any known engine). */
function engineMetrics(dto: { readonly engine?: EngineKind; readonly metrics_path?: string }): EngineMetricsSpec | undefined {
  if (isUnset(dto.engine) && isUnset(dto.metrics_path)) return undefined;
  return { path: dto.metrics_path ?? '/metrics', engine: dto.engine ?? 'any' };
}

/** A validated host entry (index `index` in `hosts`) as a spec, with every default filled in. */
function toHostSpec(dto: HostDto, index: number, mapPath: PathMapper): HostSpec {
  return {
    name: isUnset(dto.name) ? `host${index}` : dto.name,
    ssh: dto.ssh ?? null,
    sshPort: dto.ssh_port ?? 22,
    insecureAcceptHostKey: dto.insecure_accept_host_key ?? false,
    devices: dto.devices,
    devicesPerReplica: dto.devices_per_replica ?? 1,
    portBase: dto.port_base ?? 8001,
    serveArgs: dto.serve_args ?? [],
    env: dto.env ?? {},
    python: dto.python ?? 'python3',
    logDir: dto.log_dir ?? '/tmp/affinity-router',
    ...defined({
      identityFile: mapPath(dto.identity_file ?? undefined),
      knownHosts: mapPath(dto.known_hosts ?? undefined),
      model: dto.model ?? undefined,
      servedModelName: dto.served_model_name ?? undefined,
      command: dto.command ?? undefined,
      launchWrapper: dto.launch_wrapper ?? undefined,
      stopCommand: dto.stop_command ?? undefined,
      workdir: dto.workdir ?? undefined,
      maxInflight: dto.max_inflight ?? undefined,
      engineMetrics: engineMetrics(dto),
    }),
  };
}
