import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SIM_ENTRY } from './sim-process.js';

/** A local host whose replicas are simulator processes (config-file shape). */
export function simHost(name: string, devices: number[], portBase: number, simArgs: string[] = [], extra: Record<string, unknown> = {}) {
  return {
    name,
    devices,
    port_base: portBase,
    model: 'sim-model',
    command: [process.execPath, SIM_ENTRY, '--port', '{port}', '--name', '{slot}', '--model', '{model}', '--devices', '{devices}', ...simArgs],
    log_dir: mkdtempSync(join(tmpdir(), 'ar-fleet-')),
    ...extra,
  };
}
