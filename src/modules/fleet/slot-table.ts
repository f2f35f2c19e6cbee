import type { SlotSpec } from '../../config/router-config.js';

export interface Capacity {
  /** Launched + adopted replicas holding a slot. */
  readonly owned: number;
  /** min(declared slots, --max-replicas). */
  readonly ceiling: number;
  /** Slots a launch may take now (empty when the ceiling is reached). */
  readonly free_slots: string[];
}

/** Holder of a slot kept for a server the router does not own (it answers on the slot's port). */
export const FOREIGN = 'foreign#';

export type ReserveFailure = { readonly ok: false; readonly code: 'pool_exhausted' | 'no_free_slot'; readonly message: string };

/**
 * Device slots and who holds them. Reservation is synchronous, so two concurrent scale-ups can
 * never take the same slot (contract §6).
 */
export class SlotTable {
  private readonly holders = new Map<string, string>();
  private byName: Map<string, SlotSpec>;
  private declared: readonly SlotSpec[];
  private max: number;

  constructor(slots: readonly SlotSpec[], ceiling: number) {
    this.declared = slots;
    this.max = ceiling;
    this.byName = new Map(slots.map((s) => [s.name, s]));
  }

  /** The declared slots, in fill order. */
  get slots(): readonly SlotSpec[] {
    return this.declared;
  }

  /** min(declared slots, --max-replicas). */
  get ceiling(): number {
    return this.max;
  }

  /**
   * A config reload: `slots` become the declared ones. A slot that left (or changed) keeps its
   * holder until that holder releases it (its replica drains and stops), but is never handed out
   * again; a changed slot's new spec is launchable once the old holder let go.
   */
  redeclare(slots: readonly SlotSpec[], ceiling: number): void {
    this.declared = slots;
    this.max = ceiling;
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

  /** Take the first free slot (optionally on one host, or on one of a set of hosts), in fill order. */
  reserveNext(holder: string, host?: string | ReadonlySet<string>): { readonly ok: true; readonly slot: SlotSpec } | ReserveFailure {
    if (this.holders.size >= this.ceiling) {
      return { ok: false, code: 'pool_exhausted', message: `all ${this.ceiling} launchable slots are in use (ceiling ${this.ceiling})` };
    }
    const on = (s: SlotSpec): boolean => host === undefined || (typeof host === 'string' ? s.host === host : host.has(s.host));
    const slot = this.slots.find((s) => !this.holders.has(s.name) && on(s));
    if (slot === undefined) {
      const where = host === undefined ? '' : typeof host === 'string' ? ` on host '${host}'` : ` on hosts ${[...host].map((h) => `'${h}'`).join(', ')}`;
      return { ok: false, code: 'no_free_slot', message: `no free device slot${where}` };
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
