/** The autoscaler's pools follow a config reload that changes the hosts. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { loadRouterConfig } from '../../config/config.loader.js';
import type { AppLogger } from '../../common/logging/logger.js';
import type { FleetService } from '../fleet/fleet.service.js';
import type { AutoscaleView } from './autoscale-view.service.js';
import { AutoscalerService } from './autoscaler.service.js';

const host = (name: string, model: string, portBase: number) => ({ name, devices: [0], model, port_base: portBase });
const load = (hosts: unknown[]) => loadRouterConfig(['--config', 'router.json'], {}, { readFile: () => JSON.stringify({ hosts, autoscale: {} }) });

describe('AutoscalerService.reconfigure', () => {
  it('keeps the state of a model still served, adds a new model, drops one no host serves', () => {
    const config = load([host('a', 'm1', 9000), host('b', 'm2', 9100)]);
    const scaler = new AutoscalerService(config, {} as FleetService, {} as AutoscaleView, {} as SchedulerRegistry, {} as AppLogger);
    const m1 = scaler.pools.find((s) => s.pool.model === 'm1');
    assert.ok(m1 !== undefined);
    m1.pending.add('a-d0');
    config.update({ hosts: load([host('a', 'm1', 9000), host('c', 'm1', 9200), host('d', 'm3', 9300)]).hosts });
    scaler.reconfigure();
    assert.deepEqual(
      scaler.pools.map((s) => [s.pool.model, [...s.pool.hosts].sort()]),
      [
        ['m1', ['a', 'c']],
        ['m3', ['d']],
      ],
    );
    assert.equal(scaler.pools[0], m1, 'the same state: its windows and pending launches stay');
    assert.deepEqual([...m1.pending], ['a-d0']);
  });
});
