import { Module } from '@nestjs/common';
import { Clock, SystemClock } from '../../common/clock.js';
import { AffinityJobs } from './affinity.jobs.js';
import { AffinityService } from './affinity.service.js';
import { SharedSessions } from './shared-sessions.service.js';

@Module({
  providers: [AffinityService, AffinityJobs, SharedSessions, { provide: Clock, useClass: SystemClock }],
  exports: [AffinityService, SharedSessions, Clock],
})
export class AffinityModule {}
