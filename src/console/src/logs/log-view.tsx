import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ansiSegments, plainText } from './ansi.js';
import type { Connection, LogLine } from './log-source.js';

/** Every line is one row of this height (no wrapping): what lets the view render only the rows in sight. */
export const LINE_PX = 20;
const OVERSCAN = 40;

export interface LogViewProps {
  /** All lines so far, in seq order; appended to in place (`version` says when). */
  readonly lines: readonly LogLine[];
  readonly version: number;
  readonly connection: Connection;
  readonly fileName: string;
}

/**
 * The build log: a virtualised list (only the rows in sight, plus a margin, are in the DOM, so
 * 100,000 lines scroll like 100), ANSI colours as classes on text, follow / pause (scrolling up
 * pauses, Follow or the end resumes), search with next / previous, jump to a line, and download
 * of everything loaded as a text file.
 */
export function LogView({ lines, version, connection, fileName }: LogViewProps) {
  const box = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(480);
  const [follow, setFollow] = useState(true);
  const [query, setQuery] = useState('');
  const [current, setCurrent] = useState<number | undefined>();

  useEffect(() => {
    const element = box.current;
    if (element === null) return;
    const observer = new ResizeObserver(() => setHeight(element.clientHeight));
    observer.observe(element);
    return () => observer.disconnect();
  }, []);

  // Following: the newest line stays in sight as lines arrive.
  useLayoutEffect(() => {
    const element = box.current;
    if (follow && element !== null) element.scrollTop = element.scrollHeight;
  }, [version, follow]);

  const matches = useMemo(() => {
    const needle = query.trim().toLowerCase();
    if (needle === '') return [];
    const found: number[] = [];
    for (let i = 0; i < lines.length; i++) {
      if (plainText(lines[i]!.message).toLowerCase().includes(needle)) found.push(i);
    }
    return found;
    // `lines` is appended to in place: `version` is what changes.
  }, [query, version, lines]);

  const reveal = (index: number) => {
    const element = box.current;
    if (element === null) return;
    setFollow(false);
    setCurrent(index);
    element.scrollTop = Math.max(0, index * LINE_PX - element.clientHeight / 2);
  };

  const step = (direction: 1 | -1) => {
    if (matches.length === 0) return;
    const at = current === undefined ? -1 : current;
    const nextMatch =
      direction === 1
        ? (matches.find((i) => i > at) ?? matches[0]!)
        : (matches.findLast((i) => i < at) ?? matches[matches.length - 1]!);
    reveal(nextMatch);
  };

  const onScroll = () => {
    const element = box.current;
    if (element === null) return;
    setScrollTop(element.scrollTop);
    const atEnd = element.scrollTop + element.clientHeight >= element.scrollHeight - LINE_PX;
    if (!atEnd && follow) setFollow(false);
  };

  const first = Math.max(0, Math.floor(scrollTop / LINE_PX) - OVERSCAN);
  const last = Math.min(lines.length, Math.ceil((scrollTop + height) / LINE_PX) + OVERSCAN);
  const shown = lines.slice(first, last);
  const matchSet = useMemo(() => new Set(matches), [matches]);
  const position = current === undefined ? 0 : matches.indexOf(current) + 1;

  return (
    <section class="log-panel" aria-labelledby="log-heading">
      <div class="log-bar">
        <h2 id="log-heading">Log</h2>
        <ConnectionBadge connection={connection} lines={lines.length} />
        <button
          type="button"
          class="secondary"
          aria-pressed={follow}
          onClick={() => setFollow(!follow)}
        >
          {follow ? 'Pause' : 'Follow'}
        </button>
        <SearchForm
          query={query}
          onQuery={(value) => {
            setQuery(value);
            setCurrent(undefined);
          }}
          matches={matches.length}
          position={position}
          step={step}
        />
        <JumpForm lineCount={lines.length} reveal={reveal} />
        <button type="button" class="secondary" onClick={() => download(lines, fileName)}>
          Download
        </button>
      </div>
      <div
        ref={box}
        class="log"
        role="log"
        aria-label="Build log lines"
        tabIndex={0}
        onScroll={onScroll}
      >
        <div class="log-space" style={{ height: `${lines.length * LINE_PX}px` }}>
          <div class="log-rows" style={{ transform: `translateY(${first * LINE_PX}px)` }}>
            {shown.map((line, k) => (
              <LogRow
                key={line.seq}
                line={line}
                match={matchSet.has(first + k)}
                current={first + k === current}
              />
            ))}
          </div>
        </div>
      </div>
    </section>
  );
}

/** Search with next / previous: Enter (the form's submit) is Next. */
function SearchForm({
  query,
  onQuery,
  matches,
  position,
  step,
}: {
  query: string;
  onQuery: (query: string) => void;
  /** How many lines match. */
  matches: number;
  /** The current match's place among them, from 1 (0: none yet). */
  position: number;
  step: (direction: 1 | -1) => void;
}) {
  return (
    <form
      class="inline"
      role="search"
      onSubmit={(event) => {
        event.preventDefault();
        step(1);
      }}
    >
      <label for="log-search">Search</label>
      <input
        id="log-search"
        type="search"
        value={query}
        onInput={(event) => onQuery(event.currentTarget.value)}
      />
      <button type="button" class="secondary" onClick={() => step(-1)} disabled={!matches}>
        Previous
      </button>
      <button type="submit" class="secondary" disabled={!matches}>
        Next
      </button>
      <span class="muted" aria-live="polite">
        {query.trim() === '' ? '' : `${position} of ${matches} matches`}
      </span>
    </form>
  );
}

/** Go to line n (1-based), or say which lines there are. */
function JumpForm({ lineCount, reveal }: { lineCount: number; reveal: (index: number) => void }) {
  const [jump, setJump] = useState('');
  const [jumpError, setJumpError] = useState('');
  return (
    <form
      class="inline"
      onSubmit={(event) => {
        event.preventDefault();
        const line = Number(jump);
        if (!Number.isInteger(line) || line < 1 || line > lineCount) {
          setJumpError(`Enter a line from 1 to ${lineCount}`);
          return;
        }
        setJumpError('');
        reveal(line - 1);
      }}
    >
      <label for="log-jump">Go to line</label>
      <input
        id="log-jump"
        class="short"
        inputMode="numeric"
        value={jump}
        aria-describedby="log-jump-error"
        onInput={(event) => setJump(event.currentTarget.value)}
      />
      <button type="submit" class="secondary">
        Go
      </button>
      <span id="log-jump-error" class="error">
        {jumpError}
      </span>
    </form>
  );
}

/** One line: its number, and its message with ANSI colours as classes. */
function LogRow({ line, match, current }: { line: LogLine; match: boolean; current: boolean }) {
  const classes = ['line', `lvl-${line.level}`];
  if (match) classes.push('match');
  if (current) classes.push('current');
  return (
    <div class={classes.join(' ')} data-seq={line.seq}>
      <span class="ln">{line.seq + 1}</span>
      <span class="msg">
        {ansiSegments(line.message).map((segment, s) =>
          segment.classes === '' ? (
            segment.text
          ) : (
            <span key={s} class={segment.classes}>
              {segment.text}
            </span>
          ),
        )}
      </span>
    </div>
  );
}

function ConnectionBadge({ connection, lines }: { connection: Connection; lines: number }) {
  const text = (() => {
    switch (connection.state) {
      case 'loading':
        return `loading ${connection.loaded.toLocaleString()} of ${connection.total.toLocaleString()} lines`;
      case 'connecting':
        return 'connecting…';
      case 'live':
        return `live · ${lines.toLocaleString()} lines`;
      case 'reconnecting':
        return `connection lost · reconnecting from line ${(lines + 1).toLocaleString()} in ${Math.ceil(connection.inMs / 1000)} s`;
      case 'ended':
        return `${lines.toLocaleString()} lines · ${connection.reason === 'complete' ? 'complete' : `ended (${connection.reason})`}`;
      case 'failed':
        return `could not load the log: ${connection.error}`;
    }
  })();
  return (
    <span class={`conn conn-${connection.state}`} role="status" data-state={connection.state}>
      {text}
    </span>
  );
}

/** Everything loaded, as `timestamp level message` lines (escape sequences removed). */
function download(lines: readonly LogLine[], fileName: string): void {
  const text = lines
    .map((line) => `${line.timestamp} ${line.level} ${plainText(line.message)}\n`)
    .join('');
  const url = URL.createObjectURL(new Blob([text], { type: 'text/plain;charset=utf-8' }));
  const anchor = document.createElement('a');
  anchor.href = url;
  anchor.download = fileName;
  anchor.click();
  window.setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
