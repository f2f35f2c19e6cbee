import { Global, Module } from '@nestjs/common';
import { LeaderService } from './leader.service.js';
import { RedisService } from './redis.service.js';

/** What several routers share: the Redis connection (and, in the fleet module, the lease). */
@Global()
@Module({ providers: [RedisService, LeaderService], exports: [RedisService, LeaderService] })
export class ClusterModule {}
