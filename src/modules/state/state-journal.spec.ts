import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FleetState, StatePin } from './state-file.js';
import { appendJournal, createJournal, encodeJournalLine, journalPathOf, readJournal, type JournalRead } from './state-journal.js';
import { tempDir } from '../../common/temp-dir.fake.js';

const TOKEN = 'feedc0de';
/** A snapshot naming the journal `journal` (null: an older snapshot that names none). */
const state = (sessions: StatePin[], journal: string | null = TOKEN): FleetState => ({
  version: 1,
  epoch: 0,
  ...(journal === null ? {} : { journal }),
  replicas: [],
  sessions,
});
const header = (token = TOKEN): string => `${JSON.stringify({ journal: token })}\n`;
const read = (text: string, s: FleetState): JournalRead => readJournal('/s/state.json.journal', s, () => text);
const pins = (r: JournalRead): Array<[string, string]> => {
  assert.equal(r.kind, 'ok', JSON.stringify(r));
  return r.kind === 'ok' ? r.state.sessions.map((p) => [p.id, p.replica]) : [];
};

/** A line recording `ids` as `now` says they are, and `released` replicas. */
const line = async (ids: string[], now: Record<string, string>, released: string[] = []): Promise<string> =>
  (
    await encodeJournalLine(
      { ids: new Set(ids), released: new Set(released) },
      (r) => r,
      (id) => now[id],
    )
  )?.toString() ?? '';

describe('state file journal', () => {
  it('round trip: the lines the writer encodes, replayed on the snapshot, give the pins as they are now', async () => {
    const snapshot = state([
      { id: 'kept', replica: 'r1' },
      { id: 'moved', replica: 'r1' },
      { id: 'gone', replica: 'r2' },
    ]);
    const text =
      header() + (await line(['moved', 'new', 'gone'], { moved: 'r2', new: 'r1' })) + (await line(['new', 'we"ird\nid'], { new: 'r2', 'we"ird\nid': 'r1' }));
    assert.equal(text.split('\n').length, 4, 'one line per flush, ids that need escaping included');
    const r = read(text, snapshot);
    assert.deepEqual(pins(r), [
      ['kept', 'r1'],
      ['moved', 'r2'],
      ['new', 'r2'],
      ['we"ird\nid', 'r1'],
    ]);
    assert.equal(r.kind === 'ok' && r.applied, 2);
    assert.equal(r.kind === 'ok' && r.note, undefined);
  });

  it('nothing to record is no line', async () => {
    assert.equal(await encodeJournalLine({ ids: new Set(), released: new Set() }, String, () => undefined), undefined);
  });

  it('applies release before set: an id pinned to a replica after its release keeps that pin', async () => {
    const snapshot = state([
      { id: 'a', replica: 'r1' },
      { id: 'b', replica: 'r1' },
      { id: 'c', replica: 'r2' },
    ]);
    const l = await line(['b', 'x'], { b: 'r1', x: 'r1' }, ['r1']);
    assert.deepEqual(JSON.parse(l), {
      release: ['r1'],
      set: [
        ['b', 'r1'],
        ['x', 'r1'],
      ],
    });
    assert.deepEqual(pins(read(header() + l, snapshot)).sort(), [
      ['b', 'r1'],
      ['c', 'r2'],
      ['x', 'r1'],
    ]);
  });

  it('ignores a torn last line (no newline) with a warning naming the file and line', async () => {
    const text = header() + (await line(['a'], { a: 'r1' })) + '{"set":[["b","r';
    const r = read(text, state([]));
    assert.deepEqual(pins(r), [['a', 'r1']]);
    assert.equal(r.kind === 'ok' && r.note?.level, 'warn');
    assert.match((r.kind === 'ok' && r.note?.message) || '', /\/s\/state\.json\.journal:3\b/);
    // even one that happens to be valid JSON: the append was never acknowledged without its newline
    assert.deepEqual(pins(read(`${header()}{"set":[["b","r1"]]}`, state([]))), []);
  });

  it('ignores a journal whose token is not the snapshot’s, or beside a snapshot that names none', async () => {
    const text = header('0ld70ken') + (await line(['a'], { a: 'r1' }));
    for (const s of [state([{ id: 'z', replica: 'r1' }]), state([{ id: 'z', replica: 'r1' }], null)]) {
      const r = read(text, s);
      assert.deepEqual(pins(r), [['z', 'r1']]);
      assert.equal(r.kind === 'ok' && r.note?.event, 'state_journal_ignored');
    }
  });

  it('a corrupt line before the last, a header that is not one, or a bad op is invalid, naming <file>:<line>', async () => {
    const good = await line(['a'], { a: 'r1' });
    const cases: Array<[string, RegExp]> = [
      [header() + good + '{"set":[["b",\n' + good, /state\.json\.journal:3: not valid JSON/],
      [header() + good + '\n' + good, /state\.json\.journal:3: not valid JSON/],
      ['{"set":[]}\n' + good, /state\.json\.journal:1: the first line must be the header/],
      [header() + '{"set":[["a"]]}\n', /journal:2: "set" must be a list of \["id", "replica"\] pairs/],
      [header() + '{"del":"a"}\n', /journal:2: "del" must be a list of ids/],
      [header() + '{"release":[1]}\n', /journal:2: "release" must be a list of replica names/],
      [header() + '{"put":[]}\n', /journal:2: unknown key "put"/],
      [header() + '[]\n', /journal:2: must be a JSON object/],
    ];
    for (const [text, want] of cases) {
      const r = read(text, state([]));
      assert.equal(r.kind, 'invalid', text);
      if (r.kind === 'invalid') {
        assert.equal(r.problems[0]?.path, '--state-file');
        assert.match(r.problems[0]?.message ?? '', want);
        assert.match(r.problems[0]?.message ?? '', /--discard-state/);
      }
    }
  });

  it('a missing journal leaves the snapshot as it is (a note only when the snapshot names one)', () => {
    const s = state([{ id: 'a', replica: 'r1' }]);
    const missing = (p: string): string => {
      throw Object.assign(new Error(`ENOENT: ${p}`), { code: 'ENOENT' });
    };
    const r = readJournal('/nowhere/state.json.journal', s, missing);
    assert.deepEqual(pins(r), [['a', 'r1']]);
    assert.equal(r.kind === 'ok' && r.note?.event, 'state_journal_missing');
    const old = readJournal('/nowhere/state.json.journal', state([], null), missing);
    assert.equal(old.kind === 'ok' && old.note, undefined);
  });

  it('creates a journal atomically with its header, appends whole lines, and never creates one by appending', async () => {
    const dir = tempDir('ar-journal-');
    const path = journalPathOf(join(dir, 'state.json'));
    assert.equal(path, join(dir, 'state.json.journal'));
    assert.equal(await createJournal(path, TOKEN), header().length);
    await appendJournal(path, Buffer.from(await line(['a'], { a: 'r1' })));
    assert.equal(readFileSync(path, 'utf8'), `${header()}{"set":[["a","r1"]]}\n`);
    writeFileSync(path, 'replaced by hand');
    await createJournal(path, 'n3w');
    assert.equal(readFileSync(path, 'utf8'), header('n3w'));
    assert.deepEqual(
      readdirSync(dir).filter((f) => f.endsWith('.tmp')),
      [],
    );
    await assert.rejects(appendJournal(join(dir, 'absent.journal'), Buffer.from('{}\n')), /ENOENT/);
  });
});
