import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout (this file runs from dist-test/test/structure). */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const SRC = join(ROOT, 'src');

interface Owned {
  readonly cls: string;
  readonly field: string;
  /** Folder under src/ that alone may write the field. */
  readonly owner: string;
}

/** The "Who writes what" table of docs/design.md: `Class.field` cells and their owner folder. */
function ownershipTable(): Owned[] {
  const doc = readFileSync(join(ROOT, 'docs/design.md'), 'utf8');
  const start = doc.indexOf('### Who writes what');
  assert.ok(start >= 0, 'docs/design.md has no "Who writes what" section');
  const rows: Owned[] = [];
  for (const line of doc.slice(start).split('\n').slice(1)) {
    if (line.startsWith('#')) break;
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length < 4 || !cells[2]?.startsWith('`modules/')) continue;
    const owner = cells[2].replace(/`/g, '');
    for (const m of cells[1].matchAll(/`(\w+)\.(\w+)`/g)) rows.push({ cls: m[1], field: m[2], owner });
  }
  return rows;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts') && !e.name.endsWith('.fake.ts') ? [p] : [];
  });
}

/** Writes of `.field`: assignment, ++/--, compound assignment, or a Set/Map mutation. */
function writesOf(field: string): RegExp {
  return new RegExp(`(\\w+|\\))!?\\.${field}\\s*(?:=(?!=)|\\+\\+|--|[-+*/|&]=|\\.(?:add|delete|set|clear)\\()`, 'g');
}

describe('one owner per piece of state (docs/design.md, "Who writes what")', () => {
  const table = ownershipTable();
  const files = sourceFiles(SRC).map((f) => ({ path: relative(SRC, f), text: readFileSync(f, 'utf8') }));

  it('lists the state the issue names', () => {
    const names = new Set(table.map((r) => `${r.cls}.${r.field}`));
    for (const f of ['RoutingService.counter', 'LifecycleService.current']) {
      assert.ok(names.has(f), `the table has no row for ${f}`);
    }
  });

  it('every write of a listed field sits in its owner folder, and every listed field is written somewhere', () => {
    const stray: string[] = [];
    for (const row of table) {
      let written = 0;
      for (const file of files) {
        // The class initialising its own fields (`this.ready = initial.ready` in its constructor) is not a second writer.
        const ownFile = file.text.includes(`class ${row.cls} `);
        for (const m of file.text.matchAll(writesOf(row.field))) {
          // `this.field` elsewhere is another class's field of the same name.
          if (m[1] === 'this' && (!ownFile || !file.path.startsWith(row.owner))) continue;
          written++;
          if (!file.path.startsWith(row.owner)) {
            const line = file.text.slice(0, m.index).split('\n').length;
            stray.push(`${row.cls}.${row.field} written in src/${file.path}:${line} (owner: src/${row.owner})`);
          }
        }
      }
      assert.ok(written > 0, `${row.cls}.${row.field} is in the table but nothing in src/ writes it`);
    }
    assert.deepEqual(stray, []);
  });

  it("calls a replica's typed writers only from their owner folder (the compiler refuses direct writes; test/structure/ownership.fixture.ts)", () => {
    const writers: ReadonlyArray<readonly [RegExp, string]> = [
      [/\.occupy\(/g, 'modules/proxy/'],
      [/\.vacate\(/g, 'modules/proxy/'],
      [/\.drain\((?:true|false)\)/g, 'modules/fleet/'],
      [/\.beginStop\(\)/g, 'modules/fleet/'],
      [/\.markFailed\(\)/g, 'modules/fleet/'],
      [/\.health\.(?:probed|passed|failed|refused|setReady|engineLoad|engineMetricsRead)\(/g, 'modules/health/'],
      [/\.catalog\.(?:listRead|setModels|listUnreadable|markUnknownTooLong)\(/g, 'modules/health/'],
      [/\.routing\.(?:countRouted|setSpeed)\(/g, 'modules/routing/'],
      [/\.pinning\.(?:pinned|unpinned|releaseAll)\(\)/g, 'modules/affinity/'],
      [/\.placeAt\(/g, 'modules/registry/'],
      [/\.markRemoved\(\)/g, 'modules/registry/'],
    ];
    const stray: string[] = [];
    for (const [call, owner] of writers) {
      let calls = 0;
      for (const file of files) {
        if (file.path === 'modules/registry/replica.ts') continue;
        for (const m of file.text.matchAll(call)) {
          calls++;
          if (!file.path.startsWith(owner)) stray.push(`${m[0]} in src/${file.path}:${file.text.slice(0, m.index).split('\n').length} (owner: src/${owner})`);
        }
      }
      assert.ok(calls > 0, `nothing in src/ calls ${String(call)}`);
    }
    assert.deepEqual(stray, []);
  });
});
