/**
 * Device slots: where launched replicas live. A slot is one group of `devices_per_replica`
 * consecutive entries of a host's `devices`; it is named `<host>-d<first device>` and listens on
 * `port_base + first device`. Pure functions.
 */
import type { ConfigProblem } from './config-error.js';
import type { HostSpec, SlotSpec } from './router-config.js';

/** Number of slots a host declares (`len(devices) / devices_per_replica`, rounded down). */
export function slotCapacity(host: Pick<HostSpec, 'devices' | 'devicesPerReplica'>): number {
  return Math.floor(host.devices.length / host.devicesPerReplica);
}

/** The device groups of a host, in declared order. */
export function deviceGroups(host: Pick<HostSpec, 'devices' | 'devicesPerReplica'>): number[][] {
  const groups: number[][] = [];
  for (let i = 0; i + host.devicesPerReplica <= host.devices.length; i += host.devicesPerReplica) {
    groups.push(host.devices.slice(i, i + host.devicesPerReplica));
  }
  return groups;
}

/**
 * The address part of an ssh destination: what follows the last `@`, without IPv6 brackets
 * (`user@[fe80::1]` → `fe80::1`, `gpu@node02` → `node02`, `10.0.0.2` → `10.0.0.2`).
 */
export function sshAddress(ssh: string): string {
  const at = ssh.lastIndexOf('@');
  const host = at >= 0 ? ssh.slice(at + 1) : ssh;
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** The user part of an ssh destination (before the last `@`), or undefined when none is given. */
export function sshUser(ssh: string): string | undefined {
  const at = ssh.lastIndexOf('@');
  return at > 0 ? ssh.slice(0, at) : undefined;
}

/**
 * Every slot of every host in fill order: local hosts (no `ssh`) first, then ssh hosts, each in
 * config order, and within a host its device groups in order. Local slots are dialled at
 * 127.0.0.1, ssh slots at `sshAddress(ssh)`.
 */
export function computeSlots(hosts: readonly HostSpec[]): SlotSpec[] {
  const ordered = [...hosts.filter((h) => h.ssh === null), ...hosts.filter((h) => h.ssh !== null)];
  const slots: SlotSpec[] = [];
  for (const host of ordered) {
    for (const devices of deviceGroups(host)) {
      slots.push({
        name: `${host.name}-d${devices[0]}`,
        host: host.name,
        devices,
        port: host.portBase + devices[0],
        address: host.ssh === null ? '127.0.0.1' : sshAddress(host.ssh),
        local: host.ssh === null,
      });
    }
  }
  return slots;
}

/**
 * Slot problems of one host (`path` is the host's JSON path, e.g. `hosts[1]`):
 * `devices_per_replica` must divide the number of devices, and every slot port must be in 1..65535.
 */
export function findSlotProblems(host: HostSpec, path: string): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const count = host.devices.length;
  if (count % host.devicesPerReplica !== 0) {
    problems.push({
      path: `${path}.devices_per_replica`,
      message: `${host.devicesPerReplica} does not divide the ${count} declared devices`,
    });
  }
  for (const devices of deviceGroups(host)) {
    const port = host.portBase + devices[0];
    if (port < 1 || port > 65535) {
      problems.push({
        path: `${path}.port_base`,
        message: `${host.portBase} puts slot ${host.name}-d${devices[0]} on port ${port}, outside 1..65535`,
      });
      break;
    }
  }
  return problems;
}
