/**
 * Where a new conversation goes when part of its prompt is already cached somewhere (issue 15
 * item 2): many sessions of one app share a long system prompt, and a replica that served it
 * recently can skip its prefill. Pure, like routing.policy.ts.
 *
 * A partial match is worth load in proportion to its length: one request more in flight per
 * `BLOCKS_PER_LOAD` matched blocks, at most the slack. The matched replica wins when its load is
 * within that allowance of the least loaded; otherwise (and for a short match, such as a
 * one-sentence system prompt, whose allowance is 0) the normal rotation places the conversation.
 * So a long shared prompt pulls its conversations together until the replica holding it is a few
 * requests ahead, then new ones spill to the next replica, which becomes a second holder.
 */
import { expectedWait, type RoutableView } from './routing.policy.js';

/** Matched blocks (256 characters each, ~500 tokens of prefill for 8) worth one request in flight. */
export const BLOCKS_PER_LOAD = 8;

/** What the prefix index knows about a new conversation's prompt: who served its longest matching prefix. */
export interface CachedHint<R> {
  readonly target: R;
  readonly blocks: number;
}

/** The replica for a new conversation: `least` (the policy's choice), or the holder of a long enough cached prefix within its allowance. */
export function preferCached<R extends RoutableView>(least: R, hint: CachedHint<R> | undefined, slack: number): R {
  if (hint === undefined) return least;
  const r = hint.target;
  const allowance = Math.min(slack, Math.floor(hint.blocks / BLOCKS_PER_LOAD));
  if (allowance < 1 || r === least || !r.routable || r.full) return least;
  // Expected wait (contract §4.2): with equally fast replicas, the in-flight counts.
  return expectedWait(r) <= expectedWait(least) + allowance ? r : least;
}
