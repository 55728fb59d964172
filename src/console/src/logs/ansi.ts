/**
 * ANSI SGR colours in builder output, as text segments with CSS classes. The text stays text (the
 * view renders it as text nodes, never markup); only the 16 standard colours, bold, italic and
 * underline become classes (256-colour and true-colour codes map to the nearest of the 16). Every
 * other escape sequence (cursor moves, titles, hyperlinks) is dropped.
 */
export interface Segment {
  readonly text: string;
  /** Space-separated classes (`fg-1 bold`), '' for plain text. */
  readonly classes: string;
}

interface Style {
  fg?: number | undefined;
  bg?: number | undefined;
  bold?: boolean;
  italic?: boolean;
  underline?: boolean;
}

// CSI … final byte, OSC … BEL/ST, and lone two-byte escapes: matching control characters is
// the point of this expression.
// eslint-disable-next-line no-control-regex
const ESCAPE = /\u001b(?:\[([0-9;:?]*)([@-~])|\][^\u0007\u001b]*(?:\u0007|\u001b\\)|[@-Z\\-_])/g;

function classesOf(style: Style): string {
  const classes: string[] = [];
  if (style.fg !== undefined) classes.push(`fg-${style.fg}`);
  if (style.bg !== undefined) classes.push(`bg-${style.bg}`);
  if (style.bold) classes.push('bold');
  if (style.italic) classes.push('italic');
  if (style.underline) classes.push('underline');
  return classes.join(' ');
}

/** The nearest of the 16 colours to an xterm 256-colour index. */
function from256(index: number): number {
  if (index < 16) return index;
  if (index >= 232) return index < 244 ? 8 : 7; // greys
  const n = index - 16;
  return fromRgb(Math.floor(n / 36) * 51, (Math.floor(n / 6) % 6) * 51, (n % 6) * 51);
}

function fromRgb(r: number, g: number, b: number): number {
  const bright = Math.max(r, g, b) > 170 ? 8 : 0;
  const bit = (v: number) => (v > 85 ? 1 : 0);
  const colour = bit(r) | (bit(g) << 1) | (bit(b) << 2);
  return colour === 0 && bright ? 7 : colour + bright;
}

/** Applies one SGR parameter list to the style. */
function apply(style: Style, codes: number[]): void {
  for (let i = 0; i < codes.length; i++) {
    const code = codes[i]!;
    if (code === 0) {
      delete style.fg;
      delete style.bg;
      style.bold = style.italic = style.underline = false;
    } else if (code === 1) style.bold = true;
    else if (code === 3) style.italic = true;
    else if (code === 4) style.underline = true;
    else if (code === 22) style.bold = false;
    else if (code === 23) style.italic = false;
    else if (code === 24) style.underline = false;
    else if (code >= 30 && code <= 37) style.fg = code - 30;
    else if (code >= 90 && code <= 97) style.fg = code - 90 + 8;
    else if (code === 39) delete style.fg;
    else if (code >= 40 && code <= 47) style.bg = code - 40;
    else if (code >= 100 && code <= 107) style.bg = code - 100 + 8;
    else if (code === 49) delete style.bg;
    else if (code === 38 || code === 48) {
      const target = code === 38 ? 'fg' : 'bg';
      if (codes[i + 1] === 5 && codes[i + 2] !== undefined) {
        style[target] = from256(codes[i + 2]!);
        i += 2;
      } else if (codes[i + 1] === 2 && codes[i + 4] !== undefined) {
        style[target] = fromRgb(codes[i + 2]!, codes[i + 3]!, codes[i + 4]!);
        i += 4;
      }
    }
  }
}

/** Splits a line into styled segments; the style does not carry over to the next line. */
export function ansiSegments(line: string): Segment[] {
  if (!line.includes('\u001b')) return [{ text: line, classes: '' }];
  const segments: Segment[] = [];
  const push = (text: string, classes: string) => {
    const previous = segments[segments.length - 1];
    if (previous !== undefined && previous.classes === classes) {
      segments[segments.length - 1] = { text: previous.text + text, classes };
    } else if (text !== '') segments.push({ text, classes });
  };
  const style: Style = {};
  let last = 0;
  for (const match of line.matchAll(ESCAPE)) {
    if (match.index > last) push(line.slice(last, match.index), classesOf(style));
    last = match.index + match[0].length;
    if (match[2] === 'm') {
      const params = match[1] === '' || match[1] === undefined ? '0' : match[1];
      apply(
        style,
        params.split(/[;:]/).map((p) => (p === '' ? 0 : Number(p))),
      );
    }
  }
  if (last < line.length) push(line.slice(last), classesOf(style));
  return segments;
}

/** The line without any escape sequence: what search and the download see. */
export function plainText(line: string): string {
  return line.includes('\u001b') ? line.replace(ESCAPE, '') : line;
}
