/**
 * A replica's pins as the session directory keeps them (src/modules/affinity/session-directory.ts;
 * docs/design.md, "Who writes what"): how many live sessions are pinned to it, and the epoch whose
 * move releases all of them at once. Everyone reads it through `Replica`; only the directory's
 * calls below change it, and the fields themselves cannot be assigned
 * (test/structure/ownership.fixture.ts). The directory's `PinTarget` asks for this shape.
 */
export class ReplicaPins {
  private live = 0;
  private era = 0;

  /** Live pins to it. */
  get count(): number {
    return this.live;
  }
  /** Moves on to release every pin at once; an entry holding an older epoch reads as released. */
  get epoch(): number {
    return this.era;
  }

  /** One more live pin. */
  pinned(): void {
    this.live++;
  }

  /** One live pin less (removed or re-pointed). */
  unpinned(): void {
    this.live--;
  }

  /** Every pin released: none live, and the epoch moves on. */
  releaseAll(): void {
    this.live = 0;
    this.era++;
  }
}
