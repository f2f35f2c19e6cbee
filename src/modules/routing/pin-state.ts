/** How routing.service.ts hands the session directory's answers and a request's model to the pure policy. */
import type { PinLookup } from '../affinity/session-directory.js';
import type { Replica } from '../registry/replica.js';
import type { Candidates, PinState } from './routing.policy.js';

/** The candidate filter of a request naming `model` (contract §4.3); none without one. */
export function servesModel(model: string | undefined): Candidates<Replica> {
  return model === undefined ? undefined : (r) => r.serves(model);
}

/** A directory lookup as the policy reads a pin. */
export function toPinState(l: PinLookup<Replica>): PinState<Replica> {
  switch (l.status) {
    case 'none':
      return l;
    case 'live':
      return { status: 'live', replica: l.target };
    case 'expired':
      return { status: 'expired', replica: l.target };
    case 'released':
      return { status: 'released', replica: l.target, reason: l.target.removed ? 'removed' : 'draining' };
  }
}
