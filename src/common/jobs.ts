/**
 * The router's periodic jobs. Each is a named interval of Nest's SchedulerRegistry, so every timer
 * the process runs is listed and stopped in one place (docs/design.md); each is unref'd (none holds
 * the process open) and fixed-period (no drift with the time a tick takes).
 */
import type { SchedulerRegistry } from '@nestjs/schedule';

/** Runs `tick` every `everyMs` as the interval `name`; returns its handle. */
export function startJob(scheduler: SchedulerRegistry, name: string, everyMs: number, tick: () => void): NodeJS.Timeout {
  const handle = setInterval(tick, everyMs);
  handle.unref();
  scheduler.addInterval(name, handle);
  return handle;
}

/** Stops each of the named jobs that runs (a job never started, or already stopped, is skipped). */
export function stopJobs(scheduler: SchedulerRegistry, ...names: string[]): void {
  for (const name of names) if (scheduler.doesExist('interval', name)) scheduler.deleteInterval(name);
}
