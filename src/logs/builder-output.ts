import type { BuilderFormat } from '../manifest/formats.js';

export type LogLevel = 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
export interface StepProgress {
  current: number;
  total: number;
}
export interface LineInsight {
  level: LogLevel;
  /** Set when the line announces a step "current of total" (BuildKit `#5 [3/12] RUN …`, buildah `STEP 3/12: …`, docker `Step 3/12 : …`). */
  step?: StepProgress;
  /** Extra metadata for LogEntry.metadata (string→string), e.g. { step: '3/12' } or { phase: 'builder' } for pack or { builder: 'docker' } for packer, { vertex: '5' } for BuildKit. Keys lowercase. */
  metadata: Record<string, string>;
}

type Metadata = Record<string, string>;
type Matcher = (line: string) => LineInsight | undefined;

// Explicit level markers at the very start of a text: `ERROR`, `FATAL`, `PANIC` as uppercase
// tokens, or `Error:`, `error:`, `Fatal:`, `fatal:`, `panic:`; `WARN`, `WARNING` as tokens, or
// `Warning:`, `warning:`, `[Warning]`; `DEBUG`, `TRACE` as tokens. A token ends at whitespace,
// `:`, `[` or the end, so "error handling improved" and "ERRORS" are not markers.
const MARKER =
  /^(?:(?:ERROR|FATAL|PANIC)(?=[\s:[]|$)|(?:[Ee]rror|[Ff]atal|panic):|(WARN(?:ING)?(?=[\s:[]|$)|[Ww]arning:|\[(?:Warning|WARNING)\])|(DEBUG|TRACE)(?=[\s:[]|$))/;

function markerLevel(text: string): LogLevel | undefined {
  const m = MARKER.exec(text);
  if (m === null) return undefined;
  if (m[1] !== undefined) return 'WARN';
  if (m[2] !== undefined) return 'DEBUG';
  return 'ERROR';
}

/** Insights with no step and no metadata, one frozen object per level: most lines get one. */
const PLAIN: Readonly<Record<LogLevel, LineInsight>> = {
  DEBUG: Object.freeze({ level: 'DEBUG', metadata: Object.freeze({}) }),
  INFO: Object.freeze({ level: 'INFO', metadata: Object.freeze({}) }),
  WARN: Object.freeze({ level: 'WARN', metadata: Object.freeze({}) }),
  ERROR: Object.freeze({ level: 'ERROR', metadata: Object.freeze({}) }),
};

function plain(level: LogLevel, metadata?: Metadata): LineInsight {
  return metadata === undefined ? PLAIN[level] : { level, metadata };
}

/** Sets `step` and `metadata.step` together; an impossible count (0/3, 4/3) sets neither. */
function stepped(level: LogLevel, current: number, total: number, metadata: Metadata): LineInsight {
  if (current < 1 || current > total) return { level, metadata };
  metadata.step = `${current}/${total}`;
  return { level, step: { current, total }, metadata };
}

const INSTRUCTIONS =
  'ADD|ARG|CMD|COPY|ENTRYPOINT|ENV|EXPOSE|FROM|HEALTHCHECK|LABEL|MAINTAINER|ONBUILD|RUN|SHELL|STOPSIGNAL|USER|VOLUME|WORKDIR';

// logrus' coloured text format (kaniko's default `--log-format=color`, buildah/podman on a TTY):
// `INFO[0003] msg` or, with a full timestamp, `INFO[2024-05-14T09:12:03Z] msg`. The level may be
// wrapped in SGR colour codes because the Pod log keeps them.
const LOGRUS = new RegExp(
  `^(?:\\x1b\\[[\\d;]*m)?(PANI|FATA|ERRO|WARN|INFO|DEBU|TRAC)(?:\\x1b\\[[\\d;]*m)?\\[[^\\]]*\\] ?(?:(${INSTRUCTIONS})(?=\\s|$))?`,
);
// logrus without colours (kaniko `--log-format=text`, buildah/podman without a TTY):
// `time="…" level=warning msg="…"`.
const LOGFMT = new RegExp(
  `^(?:time="[^"]*" )?level=(panic|fatal|error|warning|warn|info|debug|trace)(?= |$)(?: msg="?(?:(${INSTRUCTIONS})(?=[\\s"]|$))?)?`,
);

const LOGRUS_LEVELS: Record<string, LogLevel> = {
  PANI: 'ERROR',
  FATA: 'ERROR',
  ERRO: 'ERROR',
  WARN: 'WARN',
  INFO: 'INFO',
  DEBU: 'DEBUG',
  TRAC: 'DEBUG',
  panic: 'ERROR',
  fatal: 'ERROR',
  error: 'ERROR',
  warning: 'WARN',
  warn: 'WARN',
  info: 'INFO',
  debug: 'DEBUG',
  trace: 'DEBUG',
};

function logrus(line: string, withCommand: boolean): LineInsight | undefined {
  const m = LOGRUS.exec(line) ?? LOGFMT.exec(line);
  if (m === null) return undefined;
  const level = LOGRUS_LEVELS[m[1] ?? ''] ?? 'INFO';
  return withCommand && m[2] !== undefined ? plain(level, { command: m[2] }) : plain(level);
}

// kaniko prints its fatal error bare on stdout (`error building image: error building stage: …`).
const KANIKO_EXIT =
  /^error (?:building image|checking push permissions|pushing image|resolving dockerfile path|resolving source context)\b/;

function kaniko(line: string): LineInsight | undefined {
  const insight = logrus(line, true);
  if (insight !== undefined) return insight;
  if (KANIKO_EXIT.test(line)) return plain('ERROR');
  return undefined;
}

const BK_VERTEX = /^#(\d+)(?: |$)/;
// `#7 [build 2/4] COPY …`; the brackets may also hold a platform (`[linux/arm64 build  2/10]`)
// and BuildKit pads the index to the width of the total (`[ 1/11]`).
const BK_STEP = /^#\d+ \[(?:([^\]]*?)\s+)?(\d+)\/(\d+)\](?= |$)/;
const BK_ERROR = /^#\d+ ERROR(?::|$)/;
const BK_WARN = /^#\d+ WARN(?:ING)?:/;
// Process output: `#9 0.532 text`, the seconds since the vertex started.
const BK_OUTPUT = /^#\d+ \d+\.\d* ?/;
const SPACES = /\s+/;

function buildkit(line: string): LineInsight | undefined {
  const vertex = BK_VERTEX.exec(line);
  if (vertex === null) return undefined;
  const metadata: Metadata = { vertex: vertex[1] ?? '' };
  const step = BK_STEP.exec(line);
  if (step !== null) {
    for (const token of (step[1] ?? '').split(SPACES)) {
      if (token === '') continue;
      // Stage names cannot contain '/', platforms always do.
      if (token.includes('/')) metadata.platform = token;
      else metadata.stage = token;
    }
    return stepped('INFO', Number(step[2]), Number(step[3]), metadata);
  }
  if (BK_ERROR.test(line)) return plain('ERROR', metadata);
  if (BK_WARN.test(line)) return plain('WARN', metadata);
  const output = BK_OUTPUT.exec(line);
  if (output !== null) {
    return plain(markerLevel(line.slice(output[0].length)) ?? 'INFO', metadata);
  }
  return plain('INFO', metadata);
}

// `STEP 3/12: RUN …`; multi-stage builds prefix the stage: `[1/2] STEP 3/12: RUN …`.
const BUILDAH_STEP = /^(?:\[(\d+\/\d+)\] )?STEP (\d+)\/(\d+): /;
const BUILDAH_ERROR = /^(?:Error: |error building at STEP )/;
const BRACKET_WARNING = /^\[Warning\] /;

function buildah(line: string): LineInsight | undefined {
  const step = BUILDAH_STEP.exec(line);
  if (step !== null) {
    const metadata: Metadata = {};
    if (step[1] !== undefined) metadata.stage = step[1];
    return stepped('INFO', Number(step[2]), Number(step[3]), metadata);
  }
  if (BUILDAH_ERROR.test(line)) return plain('ERROR');
  if (BRACKET_WARNING.test(line)) return plain('WARN');
  return logrus(line, false);
}

const DOCKER_STEP = /^Step (\d+)\/(\d+) : /;
const DOCKER_LAYER = /^ ?---> /;
const DOCKER_ERROR =
  /^(?:The command '.*' returned a non-zero code: \d+|Error response from daemon: )/;
const DOCKER_WARN = /^(?:\[Warning\] |DEPRECATED: )/;

function docker(line: string): LineInsight | undefined {
  const step = DOCKER_STEP.exec(line);
  if (step !== null) return stepped('INFO', Number(step[1]), Number(step[2]), {});
  if (DOCKER_LAYER.test(line)) return plain('INFO');
  if (DOCKER_ERROR.test(line)) return plain('ERROR');
  if (DOCKER_WARN.test(line)) return plain('WARN');
  return undefined;
}

// The CNB lifecycle prints no counts. Its five build phases run in this order since Platform
// API 0.7 (analyze moved before detect); lifecycle 0.21 supports only 0.7 and later. The
// optional extender phase runs between restorer and builder and gets no number.
const PACK_PHASES: Record<string, number | undefined> = {
  analyzer: 1,
  detector: 2,
  restorer: 3,
  extender: undefined,
  builder: 4,
  exporter: 5,
};
const PACK_PHASE_COUNT = 5;
const PACK_PREFIX = /^\[(analyzer|detector|restorer|extender|builder|exporter)\](?: |$)/;
const PACK_BANNER = /^===> (ANALYZING|DETECTING|RESTORING|EXTENDING|BUILDING|EXPORTING)\b/;
const PACK_BANNER_PHASES: Record<string, string> = {
  ANALYZING: 'analyzer',
  DETECTING: 'detector',
  RESTORING: 'restorer',
  EXTENDING: 'extender',
  BUILDING: 'builder',
  EXPORTING: 'exporter',
};

function packPhase(level: LogLevel, phase: string): LineInsight {
  const metadata: Metadata = { phase };
  const current = PACK_PHASES[phase];
  if (current === undefined) return plain(level, metadata);
  return stepped(level, current, PACK_PHASE_COUNT, metadata);
}

function pack(line: string): LineInsight | undefined {
  const prefixed = PACK_PREFIX.exec(line);
  if (prefixed !== null) {
    const level = markerLevel(line.slice(prefixed[0].length)) ?? 'INFO';
    return packPhase(level, prefixed[1] ?? '');
  }
  const banner = PACK_BANNER.exec(line);
  if (banner !== null) return packPhase('INFO', PACK_BANNER_PHASES[banner[1] ?? ''] ?? '');
  return undefined;
}

// `packer build -timestamp-ui` prefixes every UI line with an RFC 3339 time.
const PACKER_TIME =
  '(?:\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d+)?(?:Z|[+-]\\d{2}:\\d{2}): )?';
const PACKER_NAME = '([\\w.-]+)';
const PACKER_SAY = new RegExp(`^${PACKER_TIME}==> ${PACKER_NAME}:(?: |$)`);
const PACKER_OUTPUT = new RegExp(`^${PACKER_TIME} {4}${PACKER_NAME}:(?: |$)`);
const PACKER_ARTIFACT = new RegExp(`^${PACKER_TIME}--> ${PACKER_NAME}: `);
const PACKER_COLOR = new RegExp(`^${PACKER_TIME}${PACKER_NAME}: output will be in this color\\.$`);
const PACKER_BUILD_END = new RegExp(`^${PACKER_TIME}Build '([^']+)' (finished|errored)\\b`);
const PACKER_FAILED = new RegExp(`^${PACKER_TIME}==> Some builds didn't complete successfully`);
const PACKER_SAY_ERROR = /^Error\b/;

function packer(line: string): LineInsight | undefined {
  const say = PACKER_SAY.exec(line);
  if (say !== null) {
    const text = line.slice(say[0].length);
    const level = PACKER_SAY_ERROR.test(text) ? 'ERROR' : (markerLevel(text) ?? 'INFO');
    return plain(level, { builder: say[1] ?? '' });
  }
  const output = PACKER_OUTPUT.exec(line);
  if (output !== null) {
    return plain(markerLevel(line.slice(output[0].length)) ?? 'INFO', { builder: output[1] ?? '' });
  }
  const end = PACKER_BUILD_END.exec(line);
  if (end !== null) {
    return plain(end[2] === 'errored' ? 'ERROR' : 'INFO', { builder: end[1] ?? '' });
  }
  if (PACKER_FAILED.test(line)) return plain('ERROR');
  const named = PACKER_ARTIFACT.exec(line) ?? PACKER_COLOR.exec(line);
  if (named !== null) return plain('INFO', { builder: named[1] ?? '' });
  return undefined;
}

const MATCHERS: Record<BuilderFormat, Matcher> = {
  kaniko,
  buildkit,
  buildah,
  docker,
  pack,
  packer,
};
const ALL_MATCHERS: readonly Matcher[] = [buildkit, kaniko, buildah, docker, pack, packer];

/**
 * Inspects one complete line (no newline). `format` narrows the patterns tried; without it every format is tried.
 *
 * Only explicit markers raise the level; everything else is INFO. Output of the build's own
 * processes (BuildKit `#9 0.532 text`, pack `[builder] text`, packer `    docker: text`, and the
 * unprefixed lines kaniko, buildah and docker pass through) is INFO unless the text itself starts
 * with a marker such as `ERROR:` or `WARNING:`, so "this error message is expected" stays INFO.
 * A line no pattern of the format explains falls back to those same markers.
 *
 * pack/CNB has no counts: `step` numbers the lifecycle phases analyzer 1, detector 2, restorer
 * 3, builder 4, exporter 5 of 5, on `[phase]`-prefixed lines and on `===> PHASE` banners.
 * BuildKit repeats a vertex header when its output resumes and runs stages in parallel, so
 * steps may repeat or go backwards.
 */
export function inspectLine(line: string, format?: BuilderFormat): LineInsight {
  if (format !== undefined) return MATCHERS[format](line) ?? plain(markerLevel(line) ?? 'INFO');
  for (const matcher of ALL_MATCHERS) {
    const insight = matcher(line);
    if (insight !== undefined) return insight;
  }
  return plain(markerLevel(line) ?? 'INFO');
}
