import type { ModelEntry } from './model-entry.js';

/**
 * The models a replica serves (contract §4.3), LoRA adapters included, as the health module's model
 * discovery keeps them (docs/design.md, "Who writes what"): declared in the config, else its host's
 * model until discovery reads its `/v1/models`, and what discovery made of its last read. Everyone
 * reads it through `Replica`; only discovery's calls below change it, and the fields themselves
 * cannot be assigned (test/structure/ownership.fixture.ts).
 */
export class ReplicaModels {
  private ids: ReadonlySet<string> | undefined;
  private entries: readonly ModelEntry[] | undefined = undefined;
  private readOk: boolean | null = null;
  private neverRead = false;

  /** `expected`: the declared models, or the host's model (undefined: unknown until discovery reads the list). */
  constructor(expected: readonly string[] | undefined) {
    this.ids = expected === undefined ? undefined : new Set(expected);
  }

  /** Undefined while unknown: then the replica is a candidate for any model. */
  get models(): ReadonlySet<string> | undefined {
    return this.ids;
  }
  /** The entries of its last readable `/v1/models` list (what `GET /v1/models` answers). */
  get list(): readonly ModelEntry[] | undefined {
    return this.entries;
  }
  /** The last read: true readable, false not (logged once, in a gauge), null not tried. */
  get listOk(): boolean | null {
    return this.readOk;
  }
  /** Its list was never readable for `--models-grace`: a candidate only for requests naming no model. */
  get unknownTooLong(): boolean {
    return this.neverRead;
  }

  /** Discovery read its list (`entries`); whether the models it serves changed is {@link setModels}. */
  listRead(entries: readonly ModelEntry[]): void {
    this.readOk = true;
    this.neverRead = false;
    this.entries = entries;
  }

  /** The models it serves are now `ids` (what its list names). */
  setModels(ids: readonly string[]): void {
    this.ids = new Set(ids);
  }

  /** Discovery could not read its list; the models known before stay. */
  listUnreadable(): void {
    this.readOk = false;
  }

  /** Its list stayed unknown for `--models-grace`. */
  markUnknownTooLong(): void {
    this.neverRead = true;
  }
}
