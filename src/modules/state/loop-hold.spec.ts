import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { LoopHold } from './loop-hold.js';

/** Keeps the event loop for `ms` (a synchronous stretch of a writer). */
function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

describe('LoopHold', () => {
  it('measures the longest stretch between getting the loop back and giving it up, not the time spent waiting', async () => {
    const hold = new LoopHold();
    busy(5);
    await hold.turn();
    busy(25);
    hold.pause();
    await sleep(200); // a file write: the loop is free meanwhile
    hold.resume();
    busy(5);
    hold.pause();
    assert.ok(hold.longestMs >= 25, `the 25 ms stretch: ${hold.longestMs} ms`);
    assert.ok(hold.longestMs < 200, `the 200 ms wait is not a hold: ${hold.longestMs} ms`);
    const w = hold.written('journal', true);
    assert.equal(w.kind, 'journal');
    assert.equal(w.loopHoldSeconds, hold.longestMs / 1000);
    assert.ok(w.seconds >= 0.2 + 0.035, `the write took the waits and the stretches: ${w.seconds} s`);
  });
});
