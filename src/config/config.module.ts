/**
 * Makes the validated `RouterConfig` injectable everywhere (`constructor(private readonly config:
 * RouterConfig)`). The config is loaded and validated before Nest is imported (cli.ts), so a bad
 * one exits 2 before anything starts; the value is handed in here (docs/design.md §2 says why this
 * is not @nestjs/config).
 */
import { Global, Module, type DynamicModule } from '@nestjs/common';
import { CONFIG_SOURCE, PROCESS_ENV, type ProcessEnv } from './process-env.js';
import { RouterConfig } from './router-config.js';

/**
 * Global module providing the `RouterConfig` class token with the loaded value, and the environment
 * it was read from (`PROCESS_ENV`: locally launched replicas inherit it minus `ROUTER_*`).
 */
@Global()
@Module({})
export class RouterConfigModule {
  /**
   * `RouterConfigModule.forRoot(config, env, argv)` in the app module's imports. Without `argv`
   * (an app built in code), a reload reads `--config <the same file>` again.
   */
  static forRoot(config: RouterConfig, env: ProcessEnv = {}, argv?: readonly string[]): DynamicModule {
    const source = { argv: argv ?? (config.configPath === undefined ? [] : ['--config', config.configPath]), env };
    return {
      module: RouterConfigModule,
      global: true,
      providers: [
        { provide: RouterConfig, useValue: config },
        { provide: PROCESS_ENV, useValue: env },
        { provide: CONFIG_SOURCE, useValue: source },
      ],
      exports: [RouterConfig, PROCESS_ENV, CONFIG_SOURCE],
    };
  }
}
