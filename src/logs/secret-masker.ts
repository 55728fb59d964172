export const MASK = '***';
export const MIN_SECRET_LENGTH = 8;

export type Registration = { accepted: true } | { accepted: false; reason: string };

const LINE_BREAK = /[\r\n]/;
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Replaces registered secret values in log text before anything is stored or sent.
 *
 * Promises: after `mask(line)`, the result contains none of the masked forms of any accepted secret
 * (raw, base64/base64url whole and at each byte alignment inside a larger blob, URL-encoded,
 * JSON-escaped, also with non-ASCII as `\uXXXX` and `/` as `\/`). Every character covered by some
 * occurrence is hidden, so overlapping secrets and secrets that are prefixes of others leak
 * nothing; each covered run becomes one `MASK`. Masking is best-effort (other encodings pass
 * through), and a secret is never "accepted" unless it can be masked: `register` refuses it with a
 * reason instead.
 */
export class SecretMasker {
  private readonly secrets = new Set<string>();
  private readonly patterns = new Set<string>();
  private matcher: Matcher | undefined;
  /** Matches wherever some pattern's first PREFIX_LENGTH units occur (see `mask`). */
  private prefilter: RegExp | undefined;

  register(secret: string): Registration {
    if ([...secret].length < MIN_SECRET_LENGTH) {
      return {
        accepted: false,
        reason: `secret is shorter than ${MIN_SECRET_LENGTH} characters and cannot be masked reliably`,
      };
    }
    if (LINE_BREAK.test(secret)) {
      return {
        accepted: false,
        reason:
          'secret contains a line break; log lines are masked one at a time, so it cannot be masked',
      };
    }
    if (LONE_SURROGATE.test(secret)) {
      return {
        accepted: false,
        reason:
          'secret is not well-formed Unicode (lone surrogate), so its encoded forms are undefined',
      };
    }
    if (!this.secrets.has(secret)) {
      this.secrets.add(secret);
      for (const form of maskedForms(secret)) {
        if (form.length >= MIN_SECRET_LENGTH) this.patterns.add(form);
      }
      this.matcher = undefined;
      this.prefilter = undefined;
    }
    return { accepted: true };
  }

  /** `line` is one complete log line (no newline inside). */
  mask(line: string): string {
    if (this.patterns.size === 0) return line;
    // Most lines hold no secret: a line without any pattern's first units holds none of the
    // patterns, and V8's compiled RegExp finds that out several times faster than the automaton.
    this.prefilter ??= prefixPattern(this.patterns);
    if (!this.prefilter.test(line)) return line;
    this.matcher ??= new Matcher(this.patterns);
    // Every pattern is at least MIN_SECRET_LENGTH (> MASK) long, so each pass that masks something
    // shortens the text and the loop ends. The second pass catches the rare occurrence that the
    // first one assembled across a MASK, which also makes mask(mask(x)) === mask(x).
    let text = line;
    for (;;) {
      const spans = this.matcher.coveredSpans(text);
      if (spans.length === 0) return text;
      text = replaceSpans(text, spans);
    }
  }

  get size(): number {
    return this.secrets.size;
  }
}

/** Every pattern is at least MIN_SECRET_LENGTH units long, so each has a prefix this long. */
const PREFIX_LENGTH = 4;

/**
 * A RegExp of the patterns' distinct first PREFIX_LENGTH UTF-16 units, every unit escaped as
 * \uXXXX (no `u` flag: it matches code units, as the automaton does, lone surrogates included).
 */
function prefixPattern(patterns: ReadonlySet<string>): RegExp {
  const prefixes = new Set([...patterns].map((pattern) => pattern.slice(0, PREFIX_LENGTH)));
  const escape = (prefix: string): string => {
    let escaped = '';
    for (let i = 0; i < prefix.length; i++)
      escaped += `\\u${prefix.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return escaped;
  };
  return new RegExp([...prefixes].map(escape).join('|'));
}

function maskedForms(secret: string): Set<string> {
  const forms = new Set<string>([secret]);

  const json = JSON.stringify(secret).slice(1, -1);
  // Python's json.dumps (ensure_ascii) and many other encoders escape non-ASCII as \uXXXX.
  const asciiJson = json.replace(
    /[\u0080-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  // PHP's json_encode and some Java encoders also write '/' as '\/' (with or without \uXXXX).
  for (const form of [json, asciiJson]) {
    forms.add(form);
    forms.add(form.replace(/\//g, '\\/'));
  }

  const uriComponent = encodeURIComponent(secret);
  forms.add(uriComponent);
  forms.add(uriComponent.replace(/%20/g, '+'));
  forms.add(new URLSearchParams({ s: secret }).toString().slice('s='.length));

  const bytes = Buffer.from(secret, 'utf8');
  const whole = bytes.toString('base64');
  forms.add(whole);
  forms.add(whole.replace(/=+$/, ''));
  forms.add(toBase64Url(whole));
  forms.add(toBase64Url(whole).replace(/=+$/, ''));
  for (const core of base64Cores(bytes)) {
    if (core.length < MIN_SECRET_LENGTH) continue;
    forms.add(core);
    forms.add(toBase64Url(core));
  }
  return forms;
}

/**
 * Inside a larger base64 blob the secret's encoding depends on its byte offset mod 3. For each of
 * the three offsets, the characters whose 6 bits all come from the secret are the same whatever
 * surrounds it (GitHub Actions' runner masks these shifted encodings the same way).
 */
function base64Cores(bytes: Buffer): string[] {
  const cores: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    const first = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * (offset + bytes.length)) / 6);
    cores.push(encoded.slice(first, end));
  }
  return cores;
}

function toBase64Url(base64: string): string {
  return base64.replace(/\+/g, '-').replace(/\//g, '_');
}

type Span = [start: number, end: number];

function replaceSpans(text: string, spans: readonly Span[]): string {
  let out = '';
  let from = 0;
  for (const [start, end] of spans) {
    out += text.slice(from, start) + MASK;
    from = end;
  }
  return out + text.slice(from);
}

/**
 * Aho-Corasick automaton over UTF-16 code units: one pass over the text whatever the number of
 * patterns, and it sees overlapping occurrences, which a regex alternation cannot (a combined
 * RegExp also backtracks through every alternative on text like "aaaa…" against "aaa…ab").
 * Edges are stored per node sorted by unit, in typed arrays, to keep a matcher per build small.
 */
class Matcher {
  private readonly edgeStart: Int32Array;
  private readonly edgeUnit: Uint16Array;
  private readonly edgeTarget: Int32Array;
  /** The root's ASCII edges as a table: most steps from the root are ASCII. */
  private readonly rootAscii = new Int32Array(128);
  private readonly fail: Int32Array;
  /** Length of the longest pattern that ends at this node, 0 if none. */
  private readonly longest: Int32Array;

  constructor(patterns: Iterable<string>) {
    const children = [new Map<number, number>()];
    const longest = [0];
    for (const pattern of patterns) {
      let node = 0;
      for (let i = 0; i < pattern.length; i++) {
        const unit = pattern.charCodeAt(i);
        const edges = children[node]!;
        let next = edges.get(unit);
        if (next === undefined) {
          next = children.length;
          children.push(new Map());
          longest.push(0);
          edges.set(unit, next);
        }
        node = next;
      }
      longest[node] = Math.max(longest[node]!, pattern.length);
    }

    const nodes = children.length;
    this.edgeStart = new Int32Array(nodes + 1);
    this.edgeUnit = new Uint16Array(nodes - 1);
    this.edgeTarget = new Int32Array(nodes - 1);
    let edge = 0;
    children.forEach((edges, node) => {
      this.edgeStart[node] = edge;
      for (const [unit, target] of [...edges].sort(([a], [b]) => a - b)) {
        this.edgeUnit[edge] = unit;
        this.edgeTarget[edge] = target;
        edge++;
      }
    });
    this.edgeStart[nodes] = edge;
    for (let unit = 0; unit < 128; unit++) this.rootAscii[unit] = children[0]!.get(unit) ?? 0;

    this.fail = new Int32Array(nodes);
    this.longest = Int32Array.from(longest);
    const queue = [0];
    for (let head = 0; head < queue.length; head++) {
      const node = queue[head]!;
      for (const [unit, child] of children[node]!) {
        const fail = node === 0 ? 0 : this.step(this.fail[node]!, unit);
        this.fail[child] = fail;
        this.longest[child] = Math.max(this.longest[child]!, this.longest[fail]!);
        queue.push(child);
      }
    }
  }

  /** Sorted, disjoint, non-adjacent spans covering every occurrence of every pattern. */
  coveredSpans(text: string): Span[] {
    const spans: Span[] = [];
    let node = 0;
    for (let i = 0; i < text.length; i++) {
      node = this.step(node, text.charCodeAt(i));
      const length = this.longest[node]!;
      if (length === 0) continue;
      let start = i + 1 - length;
      // Ends only grow, so a new occurrence can only swallow spans at the top of the stack.
      for (let top = spans.at(-1); top !== undefined && top[1] >= start; top = spans.at(-1)) {
        start = Math.min(start, top[0]);
        spans.pop();
      }
      spans.push([start, i + 1]);
    }
    return spans;
  }

  private step(from: number, unit: number): number {
    let node = from;
    while (node !== 0) {
      const next = this.edge(node, unit);
      if (next !== 0) return next;
      node = this.fail[node]!;
    }
    return unit < 128 ? this.rootAscii[unit]! : this.edge(0, unit);
  }

  /** The child of `node` along `unit`, 0 if none (the root is never a child). */
  private edge(node: number, unit: number): number {
    let low = this.edgeStart[node]!;
    let high = this.edgeStart[node + 1]!;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const midUnit = this.edgeUnit[mid]!;
      if (midUnit === unit) return this.edgeTarget[mid]!;
      if (midUnit < unit) low = mid + 1;
      else high = mid;
    }
    return 0;
  }
}
