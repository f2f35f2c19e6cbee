import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { Test } from '@nestjs/testing';

import { LauncherFactory } from './launcher.factory.js';
import { LauncherModule } from './launcher.module.js';
import { waitFor } from './transports/replica-process.fake.js';
import { startSshServer, type TestSshServer } from './transports/ssh-server.fake.js';
import { testHost } from '../../config/test-host.fake.js';

describe('LauncherFactory', () => {
  let server: TestSshServer;
  before(async () => {
    server = await startSshServer();
  });
  after(() => server.close());

  const sshHost = (name: string) =>
    testHost({ name, ssh: '127.0.0.1', sshPort: server.port, identityFile: server.identityFile, knownHosts: server.knownHostsFile });

  it('gives local hosts the local transport and ssh hosts the ssh transport, one cached instance per host name', () => {
    const factory = new LauncherFactory();
    const local = factory.forHost(testHost({ name: 'here' }));
    const remote = factory.forHost(sshHost('gpu1'));
    assert.equal(local.kind, 'local');
    assert.equal(remote.kind, 'ssh');
    assert.equal(factory.forHost(testHost({ name: 'here' })), local);
    assert.equal(factory.forHost(sshHost('gpu1')), remote);
    assert.notEqual(factory.forHost(sshHost('gpu2')), remote);
  });

  it('is provided by LauncherModule and closes ssh connections when the module is destroyed', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [LauncherModule] }).compile();
    await moduleRef.init();
    const factory = moduleRef.get(LauncherFactory);
    assert.ok(factory instanceof LauncherFactory);
    const transport = factory.forHost(sshHost('gpu1'));
    assert.equal(await transport.isAlive(process.pid), true);
    assert.equal(server.openConnections, 1);
    await moduleRef.close();
    await waitFor('the ssh connection to close', () => server.openConnections === 0, 5_000);
  });
});
