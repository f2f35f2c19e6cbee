import { Global, Module } from '@nestjs/common';
import { LifecycleService } from './lifecycle.service.js';
import { ShutdownService } from './shutdown.service.js';

@Global()
@Module({ providers: [LifecycleService, ShutdownService], exports: [LifecycleService, ShutdownService] })
export class LifecycleModule {}
