import { Inject, Injectable, type INestApplication } from '@nestjs/common';
import { RouterConfig } from '../../config/router-config.js';
import { APP_LOGGER } from '../../common/logging/logging.module.js';
import type { AppLogger } from '../../common/logging/logger.js';
import { LifecycleService } from './lifecycle.service.js';

/** A step run while the router shuts down (answer the queue, drain the fleet and write state). */
export type ShutdownStep = (deadline: number) => Promise<void>;

/** The steps, in the order they run whichever module registers first. */
const STEPS = ['workers', 'admission queue', 'drain'] as const;
export type ShutdownStepName = (typeof STEPS)[number];

/**
 * Graceful shutdown (contract §6): readiness turns 503 and new data-plane requests get 503 with
 * `Connection: close` while the listener stays open; registered steps (in-flight drain, fleet
 * stop, state write) run; then the app closes.
 */
@Injectable()
export class ShutdownService {
  private readonly steps: Array<{ name: ShutdownStepName; run: ShutdownStep }> = [];
  private running: Promise<void> | undefined;

  constructor(
    private readonly config: RouterConfig,
    private readonly lifecycle: LifecycleService,
    @Inject(APP_LOGGER) private readonly log: AppLogger,
  ) {}

  /** Each step once; they run in the order of {@link STEPS}, not of registration. */
  register(name: ShutdownStepName, run: ShutdownStep): void {
    if (this.steps.some((s) => s.name === name)) throw new Error(`shutdown step ${name} is registered twice`);
    this.steps.push({ name, run });
    this.steps.sort((a, b) => STEPS.indexOf(a.name) - STEPS.indexOf(b.name));
  }

  run(app: INestApplication): Promise<void> {
    this.running ??= this.doRun(app);
    return this.running;
  }

  private async doRun(app: INestApplication): Promise<void> {
    this.lifecycle.markStopping();
    const deadline = performance.now() + this.config.drainTimeoutMs;
    for (const s of this.steps) {
      try {
        await s.run(deadline);
      } catch (e) {
        this.log.error({ err: e, step: s.name }, `shutdown step ${s.name} failed`);
      }
    }
    await app.close();
    this.log.info({ event: 'stopped' }, 'affinity-router stopped');
  }
}
