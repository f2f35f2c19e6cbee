import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HostSpec } from './router-config.js';
import { testHost } from './test-host.fake.js';
import { computeSlots, deviceGroups, findSlotProblems, slotCapacity, sshAddress, sshUser } from './slots.js';

const host = (name: string, ssh: string | null, devices: number[], over: Partial<HostSpec> = {}): HostSpec => testHost({ name, ssh, devices, ...over });

describe('slots', () => {
  it('groups consecutive devices: [0..7] by 2 gives h-d0,h-d2,h-d4,h-d6 on port_base+0,2,4,6', () => {
    const slots = computeSlots([host('h', null, [0, 1, 2, 3, 4, 5, 6, 7], { devicesPerReplica: 2, portBase: 9000 })]);
    assert.deepEqual(
      slots.map((s) => [s.name, s.port, s.devices]),
      [
        ['h-d0', 9000, [0, 1]],
        ['h-d2', 9002, [2, 3]],
        ['h-d4', 9004, [4, 5]],
        ['h-d6', 9006, [6, 7]],
      ],
    );
  });

  it('fills local hosts first, then ssh hosts, each in config order', () => {
    const slots = computeSlots([host('node02', 'gpu@node02', [0, 1]), host('local', null, [3]), host('node03', 'node03', [5])]);
    assert.deepEqual(
      slots.map((s) => s.name),
      ['local-d3', 'node02-d0', 'node02-d1', 'node03-d5'],
    );
    assert.deepEqual(
      slots.map((s) => s.port),
      [8004, 8001, 8002, 8006],
    );
  });

  it('names a slot after the first device of its group, in declared order', () => {
    const slots = computeSlots([host('dsv4', null, [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7], { devicesPerReplica: 8 })]);
    assert.deepEqual(
      slots.map((s) => [s.name, s.port]),
      [
        ['dsv4-d8', 8009],
        ['dsv4-d0', 8001],
      ],
    );
  });

  it('dials local slots at 127.0.0.1 and ssh slots at the address after the last @', () => {
    const slots = computeSlots([
      host('a', 'user@10.0.0.2', [0]),
      host('b', 'node-b.example', [0]),
      host('c', 'ops@[fd00::12]', [0]),
      host('d', 'fd00::13', [0]),
      host('e', 'odd@user@node-e', [0]),
      host('l', null, [0]),
    ]);
    assert.deepEqual(
      slots.map((s) => [s.name, s.address, s.local]),
      [
        ['l-d0', '127.0.0.1', true],
        ['a-d0', '10.0.0.2', false],
        ['b-d0', 'node-b.example', false],
        ['c-d0', 'fd00::12', false],
        ['d-d0', 'fd00::13', false],
        ['e-d0', 'node-e', false],
      ],
    );
  });

  it('splits user and address of an ssh destination', () => {
    assert.equal(sshAddress('[::1]'), '::1');
    assert.equal(sshUser('ops@[::1]'), 'ops');
    assert.equal(sshUser('node02'), undefined);
  });

  it('counts capacity as whole groups', () => {
    assert.equal(slotCapacity(host('h', null, [0, 1, 2, 3, 4, 5, 6, 7], { devicesPerReplica: 8 })), 1);
    assert.deepEqual(deviceGroups(host('h', null, [4, 5, 6], { devicesPerReplica: 1 })), [[4], [5], [6]]);
  });

  it('refuses a devices_per_replica that does not divide the devices, naming both numbers', () => {
    const problems = findSlotProblems(host('h', null, [0, 1, 2, 3, 4, 5, 6, 7], { devicesPerReplica: 3 }), 'hosts[1]');
    assert.deepEqual(problems, [{ path: 'hosts[1].devices_per_replica', message: '3 does not divide the 8 declared devices' }]);
  });

  it('refuses a slot port outside 1..65535, naming slot and port', () => {
    const problems = findSlotProblems(host('h', null, [0, 40], { portBase: 65500 }), 'hosts[0]');
    assert.equal(problems.length, 1);
    assert.equal(problems[0].path, 'hosts[0].port_base');
    assert.match(problems[0].message, /slot h-d40 on port 65540, outside 1\.\.65535/);
  });
});
