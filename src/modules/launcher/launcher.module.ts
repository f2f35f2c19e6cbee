import { Module } from '@nestjs/common';

import { LauncherFactory } from './launcher.factory.js';

/** Provides the per-host launcher transports (local and ssh) through LauncherFactory. */
@Module({
  providers: [LauncherFactory],
  exports: [LauncherFactory],
})
export class LauncherModule {}
