import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { Replica } from './replica.js';
import { destroyEndpoint } from './replica-endpoint.js';

export class RegistryError extends Error {
  constructor(
    readonly code: 'duplicate_replica' | 'unknown_replica',
    message: string,
  ) {
    super(message);
  }
}

type Listener = (r: Replica) => void;

/**
 * The replica table: the one source of truth the proxy, routing, health and fleet read.
 * `list` is the live table in index order (index = position, contiguous after every removal).
 */
@Injectable()
export class RegistryService implements OnModuleDestroy {
  private table: Replica[] = [];
  private readonly byName = new Map<string, Replica>();
  private readonly removedListeners: Listener[] = [];

  get list(): readonly Replica[] {
    return this.table;
  }

  get(name: string): Replica | undefined {
    return this.byName.get(name);
  }

  add(r: Replica): Replica {
    if (this.byName.has(r.name)) {
      throw new RegistryError('duplicate_replica', `replica '${r.name}' is already registered`);
    }
    r.placeAt(this.table.length);
    this.table.push(r);
    this.byName.set(r.name, r);
    return r;
  }

  /** Remove and reindex; the caller releases its pins (routing owns the directory). */
  remove(name: string): Replica {
    const r = this.byName.get(name);
    if (r === undefined) throw new RegistryError('unknown_replica', `no replica named '${name}'`);
    this.table = this.table.filter((x) => x !== r);
    this.table.forEach((x, i) => x.placeAt(i));
    this.byName.delete(name);
    r.markRemoved();
    for (const l of this.removedListeners) l(r);
    // Removal follows a drain, so what is left on these sockets is cut on purpose.
    destroyEndpoint(r.endpoint);
    return r;
  }

  onRemoved(l: Listener): void {
    this.removedListeners.push(l);
  }

  routableCount(): number {
    let n = 0;
    for (const r of this.table) if (r.routable) n++;
    return n;
  }

  /**
   * Whether a request naming `model` has anywhere to go (contract §4.3): some replica in the table,
   * routable or not, lists it, or has a list not known yet. False means 404 `model_not_found`.
   */
  mayServe(model: string): boolean {
    return this.table.some((r) => r.serves(model));
  }

  onModuleDestroy(): void {
    for (const r of this.table) destroyEndpoint(r.endpoint);
  }
}
