import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { ConfigError, type ConfigProblem } from '../../config/config-error.js';
import { loadRouterConfig } from '../../config/config.loader.js';
import { planReload } from '../../config/config-reload.js';
import { RouterConfig } from '../../config/router-config.js';
import { CONFIG_SOURCE, type ConfigSource } from '../../config/process-env.js';
import { auditSignal } from '../../common/audit/audit.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { AutoscalerService } from '../autoscale/autoscaler.service.js';
import { FleetReload, type FleetReloadReport } from '../fleet/fleet-reload.service.js';
import { HealthJobs } from '../health/health.jobs.js';
import { WorkerPool } from '../workers/worker-pool.service.js';
import { ReloadMetrics } from './reload.metrics.js';

/** What started a reload. */
export type ReloadTrigger = 'sighup' | 'admin';

/** The outcome of one reload (the admin API's answer, and the audit line's fields). */
export type ReloadOutcome =
  | {
      readonly result: 'applied';
      /** First 12 hex digits of the SHA-256 of the config file now in effect. */
      readonly hash: string;
      readonly changed: readonly string[];
      readonly restartRequired: readonly string[];
      readonly fleet: FleetReloadReport;
    }
  | { readonly result: 'invalid'; readonly problems: readonly ConfigProblem[] };

/**
 * Config reload without restart (docs/reload.md): loads the file and the `ROUTER_*` environment
 * again with the start's command line and the same checks; an invalid config changes nothing.
 * A valid one is compared with the running config (config-reload.ts): what changes live is
 * written into the one RouterConfig every module reads, sent to the workers, and the fleet acts
 * on its part; settings fixed at start are named as needing a restart. One reload at a time.
 */
@Injectable()
export class ReloadService implements OnModuleInit {
  private last: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly config: RouterConfig,
    @Inject(CONFIG_SOURCE) private readonly source: ConfigSource,
    private readonly fleet: FleetReload,
    private readonly healthJobs: HealthJobs,
    private readonly autoscaler: AutoscalerService,
    private readonly workers: WorkerPool,
    private readonly metrics: ReloadMetrics,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  onModuleInit(): void {
    const path = this.config.configPath;
    let text: string | undefined;
    try {
      text = path === undefined ? undefined : readFileSync(path, 'utf8');
    } catch {
      text = undefined; // gone since start: no hash until a reload reads it
    }
    this.metrics.inEffect(textHash(text));
  }

  /** Runs one reload after any still running. A SIGHUP's is audited here (the admin route audits its own call). */
  reload(trigger: ReloadTrigger): Promise<ReloadOutcome> {
    const run = this.last.then(() => {
      const o = this.run(trigger);
      if (trigger === 'sighup') auditSignal(this.log, 'SIGHUP', 'reload config', o.result === 'applied' ? 'ok' : 'invalid_config');
      return o;
    });
    this.last = run.catch(() => undefined);
    return run;
  }

  private run(trigger: ReloadTrigger): ReloadOutcome {
    let next: RouterConfig;
    // The hash is of the text the loader read, not of a second read that could see a newer file.
    const texts = new Map<string, string>();
    const readFile = (p: string): string => {
      const text = readFileSync(p, 'utf8');
      texts.set(p, text);
      return text;
    };
    try {
      next = loadRouterConfig(this.source.argv, this.source.env, { isTty: process.stdout.isTTY === true, reload: true, readFile });
    } catch (e: unknown) {
      if (!(e instanceof ConfigError)) throw e;
      this.metrics.reloaded('invalid');
      this.log.error(
        { event: 'config_reload', trigger, result: 'invalid', problems: e.problems },
        `config reload refused, nothing changed: ${e.problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`,
      );
      return { result: 'invalid', problems: e.problems };
    }
    const hash = textHash(next.configPath === undefined ? undefined : texts.get(next.configPath));
    const plan = planReload(this.config, next);
    const before = { health: this.config.health.intervalMs, autoscale: this.config.autoscale?.intervalMs };
    this.config.update(plan.fields);
    if (this.config.health.intervalMs !== before.health) this.healthJobs.reschedule();
    if (this.config.autoscale?.intervalMs !== before.autoscale) this.autoscaler.reschedule();
    if (plan.changed.includes('hosts')) this.autoscaler.reconfigure();
    if (this.workers.enabled && Object.keys(plan.fields).length > 0) this.workers.reconfigure(plan.fields);
    const fleet = this.fleet.apply(plan);
    this.metrics.reloaded('applied');
    this.metrics.inEffect(hash);
    this.log.info(
      {
        event: 'config_reload',
        trigger,
        result: 'applied',
        hash,
        changed: plan.changed,
        restart_required: plan.restartRequired,
        replicas_added: fleet.replicasAdded,
        replicas_removed: fleet.replicasRemoved,
        slots_added: fleet.slotsAdded,
        slots_removed: fleet.slotsRemoved,
        stopping: fleet.stopping,
        left_running: fleet.leftRunning,
      },
      `config reloaded (${plan.changed.length === 0 ? 'no change' : plan.changed.join(', ')})` +
        (plan.restartRequired.length > 0 ? `; needs a restart to change: ${plan.restartRequired.join(', ')}` : ''),
    );
    return { result: 'applied', hash, changed: plan.changed, restartRequired: plan.restartRequired, fleet };
  }
}

/** First 12 hex digits of the SHA-256 of a config file's text ('' without one). */
function textHash(text: string | undefined): string {
  return text === undefined ? '' : createHash('sha256').update(text).digest('hex').slice(0, 12);
}
