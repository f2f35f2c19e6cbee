/**
 * Compiled, never run: each line below writes state from outside the module that owns it, and tsc
 * must refuse it (`@ts-expect-error` fails the build when the line compiles). The in-flight count
 * of a replica is the proxy's, changed only through `Replica.occupy()` and `vacate()` as an
 * exchange or a warm copy starts and ends; whether an exchange is counted is the exchange's own.
 * Whether a replica is in rotation, stopping or failed is the fleet's (`drain()`, `beginStop()`,
 * `markFailed()`); its health is health's (`Replica.health`).
 */
import type { Exchange } from '../../src/modules/proxy/exchange.js';
import type { Replica } from '../../src/modules/registry/replica.js';

export function strayWrites(r: Replica, ex: Exchange): void {
  // @ts-expect-error the in-flight count has no setter: occupy()/vacate()
  r.outstanding++;
  // @ts-expect-error the exchanges on a replica are a read-only set outside it
  r.inflight.add(ex);
  // @ts-expect-error nor can they be removed one by one
  r.inflight.delete(ex);
  // @ts-expect-error out of rotation is the fleet's call: drain(), beginStop()
  r.draining = true;
  // @ts-expect-error a stop is begun by the fleet's stopper: beginStop()
  r.stopping = true;
  // @ts-expect-error a failed launch is the launcher's to declare: markFailed()
  r.failed = true;
  // @ts-expect-error readiness is health's: r.health.setReady() after its fall/rise checks
  r.ready = false;
  // @ts-expect-error nor can its part be replaced
  r.health = undefined as never;
  // @ts-expect-error the fall count moves with each check: passed(), failed(), refused()
  r.health.failures = 0;
  // @ts-expect-error an exchange alone knows whether its replica counts it (occupy()/vacate())
  ex.counted = true;
}
