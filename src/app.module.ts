import { Module, type DynamicModule } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { RouterConfigModule } from './config/config.module.js';
import type { RouterConfig } from './config/router-config.js';
import { LoggingModule } from './common/logging/logging.module.js';
import type { ProcessEnv } from './config/process-env.js';
import type { InternalErrors } from './common/errors/internal-errors.js';
import { LifecycleModule } from './modules/lifecycle/lifecycle.module.js';
import { ClusterModule } from './modules/cluster/cluster.module.js';
import { RoutingModule } from './modules/routing/routing.module.js';
import { HealthModule } from './modules/health/health.module.js';
import { ProxyModule } from './modules/proxy/proxy.module.js';
import { FleetModule } from './modules/fleet/fleet.module.js';
import { StateModule } from './modules/state/state.module.js';
import { AutoscaleModule } from './modules/autoscale/autoscale.module.js';
import { AdminModule } from './modules/admin/admin.module.js';
import { MetricsModule } from './modules/metrics/metrics.module.js';
import { ReloadModule } from './modules/reload/reload.module.js';

export interface AppOptions {
  /** Where log lines go (default stdout). */
  readonly logStream?: NodeJS.WritableStream;
  /** The router's environment, inherited by locally launched replicas minus ROUTER_* (default: none). */
  readonly env?: ProcessEnv;
  /** The command line the config was loaded from, read again by a reload (default: `--config <its file>`). */
  readonly argv?: readonly string[];
  /** The process's count of unexpected errors (main.ts shares its own; default: a new one). */
  readonly internalErrors?: InternalErrors;
}

/** Wires the modules; no logic. */
@Module({})
export class AppModule {
  static forRoot(config: RouterConfig, opts: AppOptions = {}): DynamicModule {
    return {
      module: AppModule,
      imports: [
        RouterConfigModule.forRoot(config, opts.env, opts.argv),
        LoggingModule.forRoot(config, opts.logStream, opts.internalErrors),
        LifecycleModule,
        ClusterModule,
        ScheduleModule.forRoot(),
        RoutingModule,
        HealthModule,
        ProxyModule,
        StateModule,
        FleetModule,
        AutoscaleModule,
        AdminModule,
        MetricsModule,
        ReloadModule,
      ],
    };
  }
}
