import { Option } from 'commander';
import { stringify } from 'yaml';

export type Format = 'table' | 'json' | 'yaml';

/** `-o, --output`: every command that prints records has it. */
export function outputOption(): Option {
  return new Option('-o, --output <format>', 'output format')
    .choices(['table', 'json', 'yaml'])
    .default('table');
}

/** `-o json` and `-o yaml` print the API's answer as it came; a table is for people. */
export function printRecords(format: Format, answer: unknown, forPeople: () => string): void {
  process.stdout.write(render(format, answer, forPeople));
}

/** What printRecords prints. */
export function render(format: Format, answer: unknown, forPeople: () => string): string {
  switch (format) {
    case 'json':
      return `${JSON.stringify(answer, null, 2)}\n`;
    case 'yaml':
      return stringify(answer);
    case 'table': {
      const text = forPeople();
      return text === '' ? '' : `${text}\n`;
    }
  }
}

/** Left-aligned columns two spaces apart, a header row first, trailing blanks trimmed. */
export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const all = [header, ...rows];
  const widths = header.map((_, column) =>
    Math.max(...all.map((row) => (row[column] ?? '').length)),
  );
  return all
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** `label: value` lines with the values aligned. */
export function fields(pairs: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...pairs.map(([label]) => label.length)) + 1;
  return pairs.map(([label, value]) => `${`${label}:`.padEnd(width)} ${value}`).join('\n');
}

/** A status line on standard error: what the CLI says about its work, apart from the records. */
export function note(text: string): void {
  process.stderr.write(`${text}\n`);
}

/** A date-time as people read it here (local, to the second), or `-`. */
export function when(value: string | null | undefined): string {
  if (value === null || value === undefined) return '-';
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return value;
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

// CSI sequences (colours, cursor moves), OSC sequences (titles, links) and two-byte escapes.
const ANSI =
  // eslint-disable-next-line no-control-regex
  /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[@-Z\\-_]/g;

/** `text` without ANSI escape sequences: what a log line becomes when not written to a terminal. */
export function stripAnsi(text: string): string {
  return text.replace(ANSI, '');
}
