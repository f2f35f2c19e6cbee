import type { SlotSpec } from '../../config/router-config.js';

export interface Capacity {
  /** Launched + adopted replicas holding a slot. */
  readonly owned: number;
  /** min(declared slots, --max-replicas). */
  readonly ceiling: number;
  /** Slots a launch may take now (empty when the ceiling is reached). */
  readonly free_slots: string[];
}

export type ReserveFailure = { readonly ok: false; readonly code: 'pool_exhausted' | 'no_free_slot'; readonly message: string };

/**
 * Device slots and who holds them. Reservation is synchronous, so two concurrent scale-ups can
 * never take the same slot (SPEC §6).
 */
export class SlotTable {
  private readonly holders = new Map<string, string>();
  private readonly byName: Map<string, SlotSpec>;

  constructor(
    readonly slots: readonly SlotSpec[],
    readonly ceiling: number,
  ) {
    this.byName = new Map(slots.map((s) => [s.name, s]));
  }

  get(name: string): SlotSpec | undefined {
    return this.byName.get(name);
  }

  holder(slot: string): string | undefined {
    return this.holders.get(slot);
  }

  get inUse(): number {
    return this.holders.size;
  }

  /** Take the first free slot (optionally on one host), in fill order. */
  reserveNext(holder: string, host?: string): { readonly ok: true; readonly slot: SlotSpec } | ReserveFailure {
    if (this.holders.size >= this.ceiling) {
      return { ok: false, code: 'pool_exhausted', message: `all ${this.ceiling} launchable slots are in use (ceiling ${this.ceiling})` };
    }
    const slot = this.slots.find((s) => !this.holders.has(s.name) && (host === undefined || s.host === host));
    if (slot === undefined) {
      return { ok: false, code: 'no_free_slot', message: host === undefined ? 'no free device slot' : `no free device slot on host '${host}'` };
    }
    this.holders.set(slot.name, holder);
    return { ok: true, slot };
  }

  /** Reserve a named slot (adoption); false when it is unknown or taken. */
  reserve(name: string, holder: string): boolean {
    if (!this.byName.has(name) || this.holders.has(name)) return false;
    this.holders.set(name, holder);
    return true;
  }

  /** Free a slot, but only for the holder that took it (a late double release cannot free a reused slot). */
  release(name: string, holder: string): boolean {
    if (this.holders.get(name) !== holder) return false;
    this.holders.delete(name);
    return true;
  }

  capacity(): Capacity {
    const room = Math.max(0, this.ceiling - this.holders.size);
    const free = this.slots.filter((s) => !this.holders.has(s.name)).map((s) => s.name);
    return { owned: this.holders.size, ceiling: this.ceiling, free_slots: free.slice(0, room) };
  }
}
