/** Test support: host declarations with every field set, as the config loader would produce them. */
import type { HostSpec } from './router-config.js';

/** A HostSpec with test defaults. */
export function testHost(overrides: Partial<HostSpec> = {}): HostSpec {
  return {
    name: 'node',
    ssh: null,
    sshPort: 22,
    insecureAcceptHostKey: false,
    devices: [0],
    devicesPerReplica: 1,
    portBase: 8001,
    model: 'm',
    serveArgs: [],
    env: {},
    python: 'python3',
    logDir: '/tmp/affinity-router',
    ...overrides,
  };
}
