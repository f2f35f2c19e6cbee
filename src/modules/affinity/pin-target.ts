/** What a session is pinned to. The registry's replica objects satisfy it structurally (`Replica.pinning`). */
export interface PinTarget {
  readonly name: string;
  /** Its pins, kept by the directory alone (a replica's `ReplicaPins`, registry/replica-pins.ts). */
  readonly pinning: PinCount;
}

/** Live pins to a target and the epoch that releases them all; changed only by the directory's calls. */
export interface PinCount {
  readonly count: number;
  /** Moved on (`releaseAll`) to release every pin at once. */
  readonly epoch: number;
  pinned(): void;
  unpinned(): void;
  releaseAll(): void;
}
