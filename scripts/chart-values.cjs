// The values table of charts/kiln/README.md, generated from charts/kiln/values.yaml: every value
// with its `# --` comment and its default. `npm run chart:docs` rewrites the table between the
// README's markers; test/chart.spec.ts fails when the README's table is not this one.
'use strict';
const { readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { parseDocument, isMap, isScalar, isSeq } = require('yaml');

const CHART = join(__dirname, '..', 'charts', 'kiln');
const BEGIN = '<!-- values-table:begin (npm run chart:docs) -->';
const END = '<!-- values-table:end -->';

/** The `# --` text of a comment block (continuation lines are the `#` lines after it). */
function described(comment) {
  if (!comment) return undefined;
  const lines = comment.split('\n').map((l) => l.trim());
  const start = lines.findIndex((l) => l.startsWith('-- '));
  if (start < 0) return undefined;
  return lines
    .slice(start)
    .map((l, i) => (i === 0 ? l.slice(3) : l))
    .join(' ')
    .trim();
}

/**
 * Rows of documented values: a key with a `# --` comment is one row (its default in JSON, maps and
 * lists whole); an undocumented map is walked into. An undocumented leaf is an error.
 */
function rowsOf(map, prefix = '', rows = []) {
  for (const [index, pair] of map.items.entries()) {
    const key = `${prefix}${pair.key.value}`;
    // The comment above a map's first key belongs to the map node in the yaml package's tree.
    const description = described(
      pair.key.commentBefore ?? (index === 0 && prefix !== '' ? map.commentBefore : undefined),
    );
    if (description === undefined) {
      if (isMap(pair.value)) rowsOf(pair.value, `${key}.`, rows);
      else throw new Error(`charts/kiln/values.yaml: ${key} has no "# --" description`);
      continue;
    }
    const value =
      isScalar(pair.value) || isMap(pair.value) || isSeq(pair.value) ? pair.value.toJSON() : null;
    rows.push({ key, default: JSON.stringify(value), description });
  }
  return rows;
}

function valuesRows() {
  const document = parseDocument(readFileSync(join(CHART, 'values.yaml'), 'utf8'));
  return rowsOf(document.contents);
}

const cell = (text) => text.replace(/\|/g, '\\|');

function valuesTable() {
  const lines = ['| Value | Default | Description |', '| --- | --- | --- |'];
  for (const row of valuesRows())
    lines.push(`| \`${row.key}\` | \`${cell(row.default)}\` | ${cell(row.description)} |`);
  return lines.join('\n');
}

/** The README's text between the markers, or undefined when they are missing. */
function readmeTable(readme) {
  const start = readme.indexOf(BEGIN);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) return undefined;
  return readme.slice(start + BEGIN.length, end).trim();
}

/** The rows of the README's table as valuesRows() gives them (Prettier may realign the table). */
function readmeRows(readme) {
  const table = readmeTable(readme);
  if (table === undefined) return undefined;
  const unquote = (text) => text.replace(/^`|`$/g, '');
  return table
    .split('\n')
    .slice(2)
    .map((line) =>
      line
        .trim()
        .replace(/^\||\|$/g, '')
        .split(/(?<!\\)\|/)
        .map((c) => c.trim().replace(/\\\|/g, '|')),
    )
    .map(([key = '', value = '', description = '']) => ({
      key: unquote(key),
      default: unquote(value),
      description,
    }));
}

module.exports = { CHART, valuesRows, valuesTable, readmeRows };

if (require.main === module) {
  const path = join(CHART, 'README.md');
  const readme = readFileSync(path, 'utf8');
  if (readmeTable(readme) === undefined) throw new Error(`${path} has no values-table markers`);
  const start = readme.indexOf(BEGIN) + BEGIN.length;
  writeFileSync(
    path,
    `${readme.slice(0, start)}\n\n${valuesTable()}\n\n${readme.slice(readme.indexOf(END))}`,
  );
}
