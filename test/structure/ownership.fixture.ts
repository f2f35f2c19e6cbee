/**
 * Compiled, never run: each line below writes state from outside the module that owns it, and tsc
 * must refuse it (`@ts-expect-error` fails the build when the line compiles). The in-flight count
 * of a replica is the proxy's, changed only through `Replica.occupy()` and `vacate()` as an
 * exchange or a warm copy starts and ends; whether an exchange is counted is the exchange's own.
 * Whether a replica is in rotation, stopping or failed is the fleet's (`drain()`, `beginStop()`,
 * `markFailed()`); its health is health's (`Replica.health`), and so is the list of models it
 * serves, kept by model discovery (`Replica.catalog`); what routing counts and measures is
 * routing's (`Replica.routing`); its pins are the session directory's (`Replica.pinning`); its
 * place in the table is the registry's (`placeAt()`, `markRemoved()`).
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
  // @ts-expect-error the models it serves are discovery's: r.catalog.setModels()
  r.models = new Set(['m']);
  // @ts-expect-error nor can the set be changed in place
  r.models?.add('m');
  // @ts-expect-error its list is the last one discovery read: r.catalog.listRead()
  r.modelList = [];
  // @ts-expect-error whether the list reads is discovery's finding: listRead(), listUnreadable()
  r.modelListOk = true;
  // @ts-expect-error the grace for an unknown list is discovery's to end: markUnknownTooLong()
  r.modelsUnknownTooLong = false;
  // @ts-expect-error the part's fields are private to it
  r.catalog.listOk = true;
  // @ts-expect-error nor can the part be replaced
  r.catalog = undefined as never;
  // @ts-expect-error a routed request is counted by routing: r.routing.countRouted()
  r.routed++;
  // @ts-expect-error speed-aware load is routing's estimate: r.routing.setSpeed()
  r.slowness = 2;
  // @ts-expect-error nor the estimate itself
  r.requestSeconds = 1;
  // @ts-expect-error nor what it runs at once
  r.batch = 8;
  // @ts-expect-error the part's fields are private to it
  r.routing.routed = 0;
  // @ts-expect-error nor can the part be replaced
  r.routing = undefined as never;
  // @ts-expect-error pins are counted by the session directory: r.pinning.pinned(), unpinned()
  r.pins++;
  // @ts-expect-error the release epoch moves only when the directory releases them all: releaseAll()
  r.pinning.epoch++;
  // @ts-expect-error the part's fields are private to it
  r.pinning.count = 0;
  // @ts-expect-error nor can the part be replaced
  r.pinning = undefined as never;
  // @ts-expect-error its place in the table is the registry's: placeAt()
  r.index = 0;
  // @ts-expect-error leaving the table is the registry's to record: markRemoved()
  r.removed = true;
  // @ts-expect-error an exchange alone knows whether its replica counts it (occupy()/vacate())
  ex.counted = true;
}
