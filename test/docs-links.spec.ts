import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

/*
 * The README is the door and docs/ the house (issue 28 item 7): every relative link in README.md,
 * the chart's README and docs/**\/*.md reaches a file of this repository, and an anchor a heading
 * of that file; the index, docs/README.md, names every ADR.
 */
const ROOT = join(__dirname, '..');
const DOCS = join(ROOT, 'docs');
const README_MAX_LINES = 350;

const markdownFiles = (): string[] => [
  join(ROOT, 'README.md'),
  join(ROOT, 'charts', 'kiln', 'README.md'),
  ...readdirSync(DOCS, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(DOCS, name))
    .sort(),
];

/** The text a reader sees as prose: fenced blocks and code spans, which hold no links, removed. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  const withoutFences = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  for (const [, heading] of withoutFences.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(heading!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    found.add(count === 0 ? base : `${base}-${count}`);
  }
  return found;
}

/** Each relative link of a markdown file (at `path`) that does not resolve, with the reason. */
function brokenLinks(path: string, markdown: string, root: string): string[] {
  const broken: string[] = [];
  const links = prose(markdown).matchAll(/!?\[(?:[^[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?[^)]*\)/g);
  for (const [, target] of links) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue;
    const [file = '', anchor] = target!.split('#', 2);
    const resolved = file === '' ? path : resolve(dirname(path), decodeURIComponent(file));
    const inRepo = relative(root, resolved);
    if (inRepo.startsWith(`..${sep}`) || inRepo === '..') {
      broken.push(`${target}: outside the repository`);
    } else if (file !== '' && !existsSync(resolved)) {
      broken.push(`${target}: no such file`);
    } else if (anchor !== undefined && resolved.endsWith('.md')) {
      const text = resolved === path ? markdown : readFileSync(resolved, 'utf8');
      if (!anchors(text).has(anchor)) broken.push(`${target}: no such heading`);
    }
  }
  return broken;
}

describe('the documentation (README.md and docs/)', () => {
  it('finds broken links, links out of the repository and missing headings', () => {
    const page = join(DOCS, 'planted.md');
    const planted = [
      '# Planted',
      '## Quick start: one build (local)',
      'Fine: [api](api.md), [a heading](api.md#input-limits), [here](#quick-start-one-build-local),',
      '[web](https://example.com/x.md), ![picture](images/console-builds.png), [adr](adr/),',
      '[the index](README.md#architecture-decision-records).',
      'Broken: [gone](no-such-page.md), [heading](api.md#no-such-heading), [out](../../shared/DESIGN.md),',
      '[a wrapped',
      'link](#nowhere).',
      '`[in code](missing.md)`',
      '```',
      '[in a block](missing.md)',
      '```',
    ].join('\n');
    expect(brokenLinks(page, planted, ROOT)).toEqual([
      'no-such-page.md: no such file',
      'api.md#no-such-heading: no such heading',
      '../../shared/DESIGN.md: outside the repository',
      '#nowhere: no such heading',
    ]);
  });

  it('has no relative link that does not resolve', () => {
    const files = markdownFiles();
    expect(files.length).toBeGreaterThan(10);
    const broken = files.flatMap((file) =>
      brokenLinks(file, readFileSync(file, 'utf8'), ROOT).map(
        (problem) => `${relative(ROOT, file)}: ${problem}`,
      ),
    );
    expect(broken).toEqual([]);
  });

  it('lists every ADR in the index, docs/README.md', () => {
    const index = join(DOCS, 'README.md');
    const linked = new Set(
      [...prose(readFileSync(index, 'utf8')).matchAll(/\]\((adr\/[^)#\s]+\.md)\)/g)].map((m) =>
        resolve(DOCS, m[1]!),
      ),
    );
    const adrs = readdirSync(join(DOCS, 'adr'))
      .filter((name) => /^\d{4}-.*\.md$/.test(name))
      .map((name) => join(DOCS, 'adr', name));
    expect(adrs.length).toBeGreaterThan(30);
    expect(adrs.filter((adr) => !linked.has(adr)).map((adr) => relative(ROOT, adr))).toEqual([]);
  });

  it(`keeps README.md a door: make run and make test, at most ${README_MAX_LINES} lines`, () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('make run');
    expect(readme).toContain('make test');
    expect(readme).toContain('](docs/README.md)');
    expect(readme.trimEnd().split('\n').length).toBeLessThanOrEqual(README_MAX_LINES);
  });
});
