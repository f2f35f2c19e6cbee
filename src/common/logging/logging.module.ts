import { Global, Module } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { createAppLogger } from './logger.js';

/** Injection token for the app's pino logger. */
export const APP_LOGGER = Symbol('APP_LOGGER');

@Global()
@Module({
  providers: [
    {
      provide: APP_LOGGER,
      inject: [RouterConfig],
      useFactory: (c: RouterConfig) => createAppLogger(c.logLevel, c.logFormat),
    },
  ],
  exports: [APP_LOGGER],
})
export class LoggingModule {}
