import { Module } from '@nestjs/common';
import { LifecycleService } from './lifecycle.service.js';
import { ShutdownService } from './shutdown.service.js';

/** The router's phase and its ordered shutdown steps; imported by each module that reads or registers them. */
@Module({ providers: [LifecycleService, ShutdownService], exports: [LifecycleService, ShutdownService] })
export class LifecycleModule {}
