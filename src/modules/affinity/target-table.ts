/**
 * Small integer ids for the targets (replicas) a slot store points at, so each slot holds an
 * Int32 instead of a reference: ids are handed out in order of first sight and never reused.
 */
export class TargetTable<T> {
  private readonly list: T[] = [];
  private readonly ids = new Map<T, number>();

  /** How many targets have an id (the next new one gets this number). */
  get size(): number {
    return this.list.length;
  }

  /** The id of `t`, assigned on first sight. */
  intern(t: T): number {
    let id = this.ids.get(t);
    if (id === undefined) {
      id = this.list.length;
      this.list.push(t);
      this.ids.set(t, id);
    }
    return id;
  }

  /** The id of `t` if it has one. */
  find(t: T): number | undefined {
    return this.ids.get(t);
  }

  at(id: number): T {
    return this.list[id];
  }
}
