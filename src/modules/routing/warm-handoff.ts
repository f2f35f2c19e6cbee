/**
 * Warm hand-off (docs/design.md §6.2, issue 15): where a new conversation lives when that is not
 * where its first turn is fastest. Pure, like routing.policy.ts.
 *
 * KV-cache capacity does not depend on a replica's speed: a 4× slower replica holds as many
 * conversations' prefixes as a fast one. Expected wait keeps new conversations off it, because a
 * first turn there (a whole cold prefill) costs the client 4× as long; the fast replicas then hold
 * every conversation and evict each other's turns. Under warm hand-off a conversation's home is
 * chosen as in-flight counts alone would choose it (today's policy, which spreads conversations
 * over every cache); when that home is slower than the replica expected wait chose, the fast
 * replica answers the first turn and a one-token copy of it prefills the home off the client's
 * path. The later turns go home under the usual slack rule, where their prefix is cached.
 */
import { leastOutstanding, type Candidates, type RoutableView } from './routing.policy.js';

/**
 * Hand-off starts once the serving replica has this share of its declared batch in flight (2
 * requests without one). The router cannot see how full a cache is; how many requests a replica
 * runs at once is its nearest view of how many conversations it serves. Below it the fast
 * replicas hold every conversation and a hand-off only moves later turns to a slower replica: on
 * bench (v) at light load (10 req/s, 20 conversations in progress) an ungated hand-off raised the
 * mean TTFT 21% over speed-aware load alone at the same hit rate, gated 1.5% (4 copies, not 21);
 * at 30 req/s the gate changed nothing (96.0% of the oracle against 96.1%). Half the batch was
 * too late: 93.8%.
 */
export const BUSY_SHARE = 0.25;
const BUSY_WITHOUT_BATCH = 2;

/** In-flight count alone: how today's policy places a conversation. */
const inFlight = (r: RoutableView): number => r.load;

/**
 * The home of a new conversation whose first turn `served` answers: the routable replica with room
 * and the fewest in flight (ties by the rotation), when it is slower than `served` and `served` is
 * busy ({@link BUSY_SHARE}); otherwise undefined (the conversation lives where it is served).
 */
export function warmHome<R extends RoutableView>(table: readonly R[], counter: number, served: R, candidate?: Candidates<R>): R | undefined {
  const busy = served.batch === undefined ? BUSY_WITHOUT_BATCH : served.batch * BUSY_SHARE;
  if (served.load < busy) return undefined;
  const home = leastOutstanding(table, counter, undefined, candidate, inFlight);
  if (home === undefined || home === served) return undefined;
  return (home.slowness ?? 1) > (served.slowness ?? 1) ? home : undefined;
}
