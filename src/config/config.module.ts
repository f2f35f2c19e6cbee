/**
 * Makes the validated `RouterConfig` injectable everywhere (`constructor(private readonly config:
 * RouterConfig)`). Named `RouterConfigModule` so it does not clash with @nestjs/config's
 * `ConfigModule`. The config is loaded before Nest starts (cli.ts), then handed in here.
 */
import { Global, Module, type DynamicModule } from '@nestjs/common';
import { RouterConfig } from './router-config.js';

/** Global module providing the `RouterConfig` class token with the loaded value. */
@Global()
@Module({})
export class RouterConfigModule {
  /** `RouterConfigModule.forRoot(config)` in the app module's imports. */
  static forRoot(config: RouterConfig): DynamicModule {
    return {
      module: RouterConfigModule,
      global: true,
      providers: [{ provide: RouterConfig, useValue: config }],
      exports: [RouterConfig],
    };
  }
}
