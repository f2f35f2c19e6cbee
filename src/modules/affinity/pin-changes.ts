/**
 * What changed in a SessionDirectory since a writer last looked (the state file's journal,
 * state/state-journal.ts): the ids whose pin was made, moved or removed, and the targets released
 * in bulk (`release`, which touches no id). Kept only when a state file is configured. The writer
 * takes both at once and looks each id up again: an id's current state is what gets recorded, so
 * an id changed five times in a second costs one entry.
 *
 * Past `limit` ids the set is dropped and `overflowed` tells the writer to write a full snapshot
 * instead (a journal line that large would cost more than the snapshot; and the set's memory stays
 * bounded when, say, a million pins are adopted at start).
 */
export class PinChanges<T> {
  private ids = new Set<string>();
  private released = new Set<T>();
  private over = false;

  constructor(readonly limit: number) {}

  /** Whether anything changed since the last `take`. */
  get pending(): boolean {
    return this.over || this.ids.size > 0 || this.released.size > 0;
  }

  /** `id`'s pin was made, moved or removed. The hot path: one Set.add. */
  mark(id: string): void {
    if (this.over) return;
    this.ids.add(id);
    if (this.ids.size > this.limit) this.overflow();
  }

  /** Every pin to `target` was released at once. */
  release(target: T): void {
    if (!this.over) this.released.add(target);
  }

  /** Hands over what changed and starts afresh: changes made from now on go to the next `take`. */
  take(): { readonly ids: ReadonlySet<string>; readonly released: ReadonlySet<T>; readonly overflowed: boolean } {
    const taken = { ids: this.ids, released: this.released, overflowed: this.over };
    this.ids = new Set();
    this.released = new Set();
    this.over = false;
    return taken;
  }

  private overflow(): void {
    this.over = true;
    this.ids = new Set();
    this.released = new Set();
  }
}
