/**
 * A parser of the Prometheus text exposition format (0.0.4), strict enough to fail a test on a
 * malformed scrape: every sample must belong to a family declared by # TYPE, label values are
 * unescaped, values are Go-style floats (NaN, +Inf, -Inf).
 * https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
 */

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Family {
  readonly name: string;
  readonly type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  readonly help: string;
  readonly samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** The families of a scrape by name; throws on the first line that is not the format. */
export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const helps = new Map<string, string>();
  text.split('\n').forEach((raw, index) => {
    const line = raw.trimEnd();
    const fail = (why: string): never => {
      throw new Error(`line ${index + 1}: ${why}: ${JSON.stringify(line)}`);
    };
    if (line === '') return;
    if (line.startsWith('#')) {
      const match = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
      if (match === null) return; // a plain comment
      const [, kind, name = '', rest = ''] = match;
      if (!NAME.test(name)) fail('bad metric name');
      if (kind === 'HELP') {
        helps.set(name, rest.replace(/\\n/g, '\n').replace(/\\\\/g, '\\'));
        const family = families.get(name);
        if (family !== undefined) (family as { help: string }).help = helps.get(name) ?? '';
        return;
      }
      if (!TYPES.has(rest)) fail('bad type');
      if (families.has(name)) fail('second TYPE for a family');
      families.set(name, {
        name,
        type: rest as Family['type'],
        help: helps.get(name) ?? '',
        samples: [],
      });
      return;
    }
    const sample = parseSample(line, fail);
    const family = familyOf(families, sample.name);
    if (family === undefined) fail('sample without a # TYPE');
    family!.samples.push(sample);
  });
  return families;
}

function familyOf(families: Map<string, Family>, sampleName: string): Family | undefined {
  const own = families.get(sampleName);
  if (own !== undefined) return own;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sampleName.endsWith(suffix)) continue;
    const family = families.get(sampleName.slice(0, -suffix.length));
    if (family !== undefined && (family.type === 'histogram' || family.type === 'summary')) {
      return family;
    }
  }
  return undefined;
}

function parseSample(line: string, fail: (why: string) => never): Sample {
  const nameEnd = line.search(/[{ ]/);
  if (nameEnd <= 0) fail('no sample name');
  const name = line.slice(0, nameEnd);
  if (!NAME.test(name)) fail('bad sample name');
  const labels: Record<string, string> = {};
  let at = nameEnd;
  if (line[at] === '{') {
    at += 1;
    while (line[at] !== '}') {
      const eq = line.indexOf('=', at);
      if (eq < 0) fail('label without =');
      const label = line.slice(at, eq).trim();
      if (!LABEL_NAME.test(label)) fail('bad label name');
      if (line[eq + 1] !== '"') fail('label value not quoted');
      let value = '';
      let i = eq + 2;
      for (; i < line.length && line[i] !== '"'; i += 1) {
        if (line[i] === '\\') {
          const next = line[i + 1];
          value += next === 'n' ? '\n' : next;
          i += 1;
        } else value += line[i];
      }
      if (i >= line.length) fail('unterminated label value');
      if (label in labels) fail('label twice');
      labels[label] = value;
      at = i + 1;
      if (line[at] === ',') at += 1;
      else if (line[at] !== '}') fail('expected , or }');
    }
    at += 1;
  }
  const rest = line.slice(at).trim().split(/\s+/);
  if (rest.length < 1 || rest.length > 2 || rest[0] === '') fail('expected a value');
  const value = parseValue(rest[0] ?? '') ?? fail('bad value');
  return { name, labels, value };
}

/** As Prometheus reads a value (Go's ParseFloat): NaN and Inf in any case (prom-client: `Nan`). */
function parseValue(text: string): number | undefined {
  const special = text.toLowerCase();
  if (special === 'nan') return NaN;
  if (['inf', '+inf', 'infinity', '+infinity'].includes(special)) return Infinity;
  if (special === '-inf' || special === '-infinity') return -Infinity;
  const n = Number(text);
  return /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text) && Number.isFinite(n) ? n : undefined;
}

/** The sum of a family's samples named `sampleName` whose labels include `where`. */
export function sumOf(
  families: Map<string, Family>,
  sampleName: string,
  where: Readonly<Record<string, string>> = {},
): number {
  const family = familyOf(families, sampleName);
  if (family === undefined) return 0;
  return family.samples
    .filter((s) => s.name === sampleName)
    .filter((s) => Object.entries(where).every(([k, v]) => s.labels[k] === v))
    .reduce((total, s) => total + s.value, 0);
}

/** Scrapes `url` and parses it. */
export async function scrape(url: string): Promise<Map<string, Family>> {
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
  return parsePrometheusText(await res.text());
}
