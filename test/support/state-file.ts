import { readStateFile, type StatePin } from '../../src/modules/state/state-file.js';
import { journalPathOf, readJournal } from '../../src/modules/state/state-journal.js';

/**
 * The pins a restart with `--state-file path` would adopt: the snapshot with its journal applied,
 * read the router's own way. Empty while there is no complete file yet (a write may be part-way).
 */
export function recordedPins(path: string): StatePin[] {
  const snapshot = readStateFile(path);
  if (snapshot.kind !== 'ok') return [];
  const withJournal = readJournal(journalPathOf(path), snapshot.state);
  return withJournal.kind === 'ok' ? [...withJournal.state.sessions] : [];
}

/** The pins in the snapshot alone (what a reader that ignores the journal would adopt). */
export function snapshotPins(path: string): StatePin[] {
  const snapshot = readStateFile(path);
  return snapshot.kind === 'ok' ? [...snapshot.state.sessions] : [];
}
