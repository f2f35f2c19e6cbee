/**
 * Recency order over integer slots: an intrusive doubly linked list in two typed arrays, so a
 * touch is a few array writes and no object per entry. The head is the least recently used slot.
 * O(1) append, remove and move-to-tail.
 */
export class RecencyList {
  private first = -1;
  private last = -1;
  private prev: Int32Array;
  private next: Int32Array;

  constructor(capacity: number) {
    this.prev = new Int32Array(capacity);
    this.next = new Int32Array(capacity);
  }

  /** The least recently used slot, or -1 when the list is empty. */
  get head(): number {
    return this.first;
  }

  /** The slot after `s` (more recently used), or -1 at the tail. */
  after(s: number): number {
    return this.next[s];
  }

  /** `s` becomes the most recently used. */
  append(s: number): void {
    this.prev[s] = this.last;
    this.next[s] = -1;
    if (this.last >= 0) this.next[this.last] = s;
    else this.first = s;
    this.last = s;
  }

  remove(s: number): void {
    const p = this.prev[s];
    const n = this.next[s];
    if (p >= 0) this.next[p] = n;
    else this.first = n;
    if (n >= 0) this.prev[n] = p;
    else this.last = p;
  }

  moveToTail(s: number): void {
    if (this.last === s) return;
    this.remove(s);
    this.append(s);
  }

  /** Room for slots up to `capacity - 1`, keeping the order. */
  grow(capacity: number): void {
    const prev = new Int32Array(capacity);
    const next = new Int32Array(capacity);
    prev.set(this.prev);
    next.set(this.next);
    this.prev = prev;
    this.next = next;
  }
}
