import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { loadRouterConfig } from './config.loader.js';
import { RouterConfigModule } from './config.module.js';
import { RouterConfig } from './router-config.js';

@Injectable()
class NeedsConfig {
  constructor(readonly config: RouterConfig) {}
}

/** A feature module that does not import RouterConfigModule itself. */
@Module({ providers: [NeedsConfig], exports: [NeedsConfig] })
class FeatureModule {}

describe('RouterConfigModule', () => {
  const config = loadRouterConfig(['--config', 'r.json', '--port', '9123'], {}, { readFile: () => '{"replicas":[{"host":"a","port":1}]}' });

  it('provides the loaded RouterConfig globally, to modules that do not import it', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [RouterConfigModule.forRoot(config), FeatureModule] }).compile();
    try {
      assert.equal(moduleRef.get(RouterConfig), config);
      assert.equal(moduleRef.get(NeedsConfig).config.listenPort, 9123);
    } finally {
      await moduleRef.close();
    }
  });
});
