import { Module } from '@nestjs/common';
import { Clock, SystemClock } from '../../common/clock.js';
import { AffinityService } from './affinity.service.js';
import { SharedSessions } from './shared-sessions.service.js';
import { ClusterModule } from '../cluster/cluster.module.js';

@Module({
  imports: [ClusterModule],
  providers: [AffinityService, SharedSessions, { provide: Clock, useClass: SystemClock }],
  exports: [AffinityService, SharedSessions, Clock],
})
export class AffinityModule {}
