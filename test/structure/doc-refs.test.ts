import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout (this file runs from dist-test/test/structure). */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * The retired name of the product contract, a file outside the repository. Built from two halves so
 * that this file, which must be scanned like every other, does not contain it.
 */
const RETIRED = ['SP', 'EC'].join('');

/** What is scanned for references: the code, the tests, the benchmarks, the docs, the generated API description. */
const SCANNED = ['src', 'test', 'bench', 'docs', 'README.md', 'openapi.json'];

/** Every file under `path` (or `path` itself), repository-relative. */
function filesUnder(path: string): string[] {
  const abs = join(ROOT, path);
  if (!statSync(abs).isDirectory()) return [path];
  return readdirSync(abs, { withFileTypes: true }).flatMap((e) => filesUnder(join(path, e.name)));
}

const scanned = SCANNED.flatMap(filesUnder).map((path) => ({ path, text: readFileSync(join(ROOT, path), 'utf8') }));

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split('\n').length;
}

/** Markdown without fenced code blocks and inline code spans: what is left is prose, headings and links. */
function prose(md: string): string {
  return md.replace(/^```[^\n]*\n[\s\S]*?^```[^\n]*$/gm, (block) => block.replace(/[^\n]/g, ' ')).replace(/`[^`\n]*`/g, (span) => ' '.repeat(span.length));
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}_ -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a markdown file offers: one per heading (repeats numbered as GitHub does) and every explicit `id`. */
function anchorsOf(md: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const text = md.replace(/^```[^\n]*\n[\s\S]*?^```[^\n]*$/gm, '');
  for (const m of text.matchAll(/^#{1,6} +(.+?) *#* *$/gm)) {
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of md.matchAll(/\bid="([^"]+)"/g)) anchors.add(m[1]);
  return anchors;
}

/** Fails listing every entry, one a line, under `what`. */
function assertNone(found: readonly string[], what: string): void {
  assert.equal(found.length, 0, `${what}:\n  ${found.join('\n  ')}`);
}

describe('references in the docs and the code resolve inside the repository', () => {
  it(`no file under ${SCANNED.join(', ')} names the contract by its retired file name`, () => {
    const hits = scanned.flatMap(({ path, text }) => [...text.matchAll(new RegExp(`\\b${RETIRED}`, 'g'))].map((m) => `${path}:${lineOf(text, m.index)}`));
    assertNone(hits, `say "contract §N" (docs/contract.md) instead of naming the file outside the repository`);
  });

  it('every "contract §N" reference names a heading of docs/contract.md', () => {
    const contract = readFileSync(join(ROOT, 'docs/contract.md'), 'utf8');
    const sections = new Set([...contract.matchAll(/^#{2,3} §(\d+(?:\.\d+)*) /gm)].map((m) => m[1]));
    assert.ok(sections.has('4.2'), 'docs/contract.md has no "### §4.2 ..." heading');
    const unresolved: string[] = [];
    let refs = 0;
    for (const { path, text } of scanned) {
      // "contract §3", "contract §1, §8", "docs/contract.md §4.3 and §9", "§6.1 of the contract".
      const lists = [
        ...text.matchAll(/\bcontract(?:\.md)? (§\d+(?:\.\d+)*(?:(?:, | and | or )§\d+(?:\.\d+)*)*)/g),
        ...text.matchAll(/(§\d+(?:\.\d+)*) of the contract/g),
      ];
      for (const m of lists) {
        for (const [, n] of m[1].matchAll(/§(\d+(?:\.\d+)*)/g)) {
          refs++;
          if (!sections.has(n)) unresolved.push(`${path}:${lineOf(text, m.index)}: §${n}`);
        }
      }
    }
    assert.ok(refs > 0, 'no "contract §N" reference found at all: is the scan looking in the right place?');
    assertNone(unresolved, 'references to no heading of docs/contract.md');
  });

  it('README.md is an entry point of at most 400 lines', () => {
    const text = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    assert.ok(lines <= 400, `README.md has ${lines} lines; move reference material to docs/`);
  });

  it('the README links every file in docs/', () => {
    const readme = prose(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    const missing = readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md') && !readme.includes(`](docs/${f}`));
    assertNone(missing, 'docs/ files the index in README.md does not link');
  });

  it('every relative link in README.md and docs/*.md names an existing file, and an existing heading when it has an anchor', () => {
    const pages = [
      'README.md',
      ...readdirSync(join(ROOT, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const anchorCache = new Map<string, Set<string>>();
    const anchors = (abs: string): Set<string> => {
      let set = anchorCache.get(abs);
      if (!set) anchorCache.set(abs, (set = anchorsOf(readFileSync(abs, 'utf8'))));
      return set;
    };
    const broken: string[] = [];
    let links = 0;
    for (const page of pages) {
      const raw = readFileSync(join(ROOT, page), 'utf8');
      for (const m of prose(raw).matchAll(/\]\(([^)\s]+)(?: "[^"]*")?\)/g)) {
        const target = m[1];
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
        links++;
        const [path, anchor] = target.split('#', 2);
        const abs = path === '' ? join(ROOT, page) : resolve(join(ROOT, dirname(page)), decodeURIComponent(path));
        const where = `${page}:${lineOf(raw, m.index)}: ${target}`;
        if (!existsSync(abs)) broken.push(`${where} (no such file: ${relative(ROOT, abs)})`);
        else if (anchor !== undefined && abs.endsWith('.md') && !anchors(abs).has(anchor)) broken.push(`${where} (no such heading)`);
      }
    }
    assert.ok(links > 20, `only ${links} relative links found: is the scan looking in the right place?`);
    assertNone(broken, 'broken links');
  });
});
