import { Global, Module, type DynamicModule } from '@nestjs/common';
import type { RouterConfig } from '../../config/router-config.js';
import { InternalErrors } from '../errors/internal-errors.js';
import { createAppLogger } from './logger.js';

/** Injection token for the app's pino logger. */
export const APP_LOGGER = Symbol('APP_LOGGER');

@Global()
@Module({})
export class LoggingModule {
  /**
   * `out` defaults to stdout; tests pass a stream to read the log lines. `internalErrors`: the
   * process's count of router bugs caught instead of crashing, logged and counted together.
   */
  static forRoot(config: RouterConfig, out?: NodeJS.WritableStream, internalErrors = new InternalErrors()): DynamicModule {
    return {
      module: LoggingModule,
      providers: [
        { provide: APP_LOGGER, useValue: createAppLogger(config.logLevel, config.logFormat, out) },
        { provide: InternalErrors, useValue: internalErrors },
      ],
      exports: [APP_LOGGER, InternalErrors],
    };
  }
}
