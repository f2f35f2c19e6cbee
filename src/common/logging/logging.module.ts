import { Global, Module, type DynamicModule } from '@nestjs/common';
import type { RouterConfig } from '../../config/router-config.js';
import { createAppLogger } from './logger.js';

/** Injection token for the app's pino logger. */
export const APP_LOGGER = Symbol('APP_LOGGER');

@Global()
@Module({})
export class LoggingModule {
  /** `out` defaults to stdout; tests pass a stream to read the log lines. */
  static forRoot(config: RouterConfig, out?: NodeJS.WritableStream): DynamicModule {
    return {
      module: LoggingModule,
      providers: [{ provide: APP_LOGGER, useValue: createAppLogger(config.logLevel, config.logFormat, out) }],
      exports: [APP_LOGGER],
    };
  }
}
