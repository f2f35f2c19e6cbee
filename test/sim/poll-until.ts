import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

/** Reads until `ok` holds (every 20 ms), failing with the last value after `timeoutMs`. */
export async function pollUntil<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) assert.fail(`${what} not reached within ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
    await sleep(20);
  }
}
