import { Module } from '@nestjs/common';
import { Clock, SystemClock } from '../../common/clock.js';
import { AffinityService } from './affinity.service.js';

@Module({
  providers: [AffinityService, { provide: Clock, useClass: SystemClock }],
  exports: [AffinityService, Clock],
})
export class AffinityModule {}
