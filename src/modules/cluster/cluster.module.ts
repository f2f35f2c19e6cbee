import { Module } from '@nestjs/common';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { LeaderService } from './leader.service.js';
import { RedisService } from './redis.service.js';

/** What several routers share: the Redis connection and the fleet leadership lease. Imported by each module that uses them. */
@Module({ imports: [LifecycleModule], providers: [RedisService, LeaderService], exports: [RedisService, LeaderService] })
export class ClusterModule {}
