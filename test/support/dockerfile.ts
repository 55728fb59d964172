/**
 * Just enough of the Dockerfile and .dockerignore formats for test/image.spec.ts to check the
 * image's invariants where no container engine can build it: instructions (with `\` line
 * continuations, comments dropped), stages, ARG defaults, and Docker's ignore-file matching.
 */

export interface Instruction {
  /** Upper-cased: FROM, RUN, COPY, … */
  readonly keyword: string;
  readonly args: string;
  readonly line: number;
}

export interface Stage {
  /** `FROM <image> [AS <name>]`, the image with ARG defaults substituted. */
  readonly image: string;
  readonly name: string | undefined;
  readonly instructions: Instruction[];
}

export interface Dockerfile {
  /** ARGs declared before the first FROM, with their defaults. */
  readonly globalArgs: ReadonlyMap<string, string>;
  readonly stages: Stage[];
}

function instructionsOf(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = '';
  let startLine = 0;
  text.split('\n').forEach((raw, index) => {
    const trimmed = raw.trim();
    if (pending === '' && (trimmed === '' || trimmed.startsWith('#'))) return;
    if (pending !== '' && trimmed.startsWith('#')) return; // a comment inside a continuation
    if (pending === '') startLine = index + 1;
    if (trimmed.endsWith('\\')) {
      pending += `${trimmed.slice(0, -1)} `;
      return;
    }
    const full = (pending + trimmed).trim();
    pending = '';
    const match = /^(\S+)\s*(.*)$/s.exec(full);
    if (match) out.push({ keyword: match[1]!.toUpperCase(), args: match[2]!, line: startLine });
  });
  if (pending !== '') throw new Error('the Dockerfile ends inside a line continuation');
  return out;
}

/** `NAME=value` or `NAME="value"` of an ARG line. */
function argOf(args: string): [string, string | undefined] {
  const match = /^([A-Za-z_][A-Za-z0-9_]*)(?:=(?:"([^"]*)"|(\S*)))?$/.exec(args.trim());
  if (!match) throw new Error(`unreadable ARG ${args}`);
  return [match[1]!, match[2] ?? match[3]];
}

export function parseDockerfile(text: string): Dockerfile {
  const globalArgs = new Map<string, string>();
  const stages: Stage[] = [];
  for (const instruction of instructionsOf(text)) {
    if (instruction.keyword === 'FROM') {
      const [image = '', as, name] = instruction.args.split(/\s+/);
      const resolved = image.replace(/\$\{(\w+)\}|\$(\w+)/g, (_all, a?: string, b?: string) => {
        const value = globalArgs.get((a ?? b)!);
        if (value === undefined) throw new Error(`FROM uses ${a ?? b}, an ARG without a default`);
        return value;
      });
      stages.push({
        image: resolved,
        name: as?.toUpperCase() === 'AS' ? name : undefined,
        instructions: [],
      });
    } else if (stages.length === 0) {
      if (instruction.keyword !== 'ARG') throw new Error(`${instruction.keyword} before FROM`);
      const [name, value] = argOf(instruction.args);
      if (value !== undefined) globalArgs.set(name, value);
    } else {
      stages.at(-1)!.instructions.push(instruction);
    }
  }
  return { globalArgs, stages };
}

/** Go's filepath.Match for one path segment pattern (`*`, `?`, `[...]`), as a RegExp. */
function segmentPattern(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') out += '[^/]*';
    else if (c === '?') out += '[^/]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 1);
      if (end < 0) throw new Error(`unclosed [ in ${pattern}`);
      out += `[${pattern.slice(i + 1, end).replace(/^!/, '^')}]`;
      i = end;
    } else out += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return out;
}

/**
 * Docker's .dockerignore rules (moby/patternmatcher): patterns are cleaned paths matched from the
 * context root, `**` spans any number of directories, a match also excludes everything below it,
 * and the last matching line wins (`!` lines re-include).
 */
export function dockerIgnore(text: string): (path: string) => boolean {
  const rules = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const negated = line.startsWith('!');
      const pattern = (negated ? line.slice(1) : line).trim().replace(/^\/+|\/+$/g, '');
      const body = pattern
        .split('/')
        .map((segment) => (segment === '**' ? '(?:.*)' : segmentPattern(segment)))
        .join('/')
        .replace(/\(\?:\.\*\)\//g, '(?:.*/)?');
      return { negated, regex: new RegExp(`^${body}(?:/.*)?$`) };
    });
  return (path: string) => {
    let ignored = false;
    for (const rule of rules) if (rule.regex.test(path)) ignored = !rule.negated;
    return ignored;
  };
}
