import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { inspectLine, type LineInsight, type LogLevel } from './builder-output.js';
import { type BuilderFormat } from '../manifest/formats.js';

const FORMATS: BuilderFormat[] = ['kaniko', 'buildkit', 'buildah', 'docker', 'pack', 'packer'];

function fixtureLines(format: BuilderFormat): string[] {
  const text = readFileSync(join(__dirname, '__fixtures__', `${format}.log`), 'utf8');
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/** Lines `from` to `to` (1-based, inclusive) all carrying `step`. */
function span(from: number, to: number, step: string): Record<number, string> {
  const out: Record<number, string> = {};
  for (let line = from; line <= to; line++) out[line] = step;
  return out;
}

interface FixtureCase {
  format: BuilderFormat;
  lines: number;
  /** 1-based line number → level, for every line that is not INFO. */
  notInfo: Record<number, LogLevel>;
  /** 1-based line number → "current/total", for every line that carries a step. */
  steps: Record<number, string>;
}

const fixtures: FixtureCase[] = [
  {
    format: 'kaniko',
    lines: 37,
    notInfo: { 4: 'WARN', 37: 'ERROR' },
    steps: {},
  },
  {
    format: 'buildkit',
    lines: 40,
    notInfo: { 3: 'WARN', 35: 'ERROR', 40: 'ERROR' },
    steps: { 12: '1/5', 20: '2/5', 23: '3/5', 26: '4/5', 31: '5/5' },
  },
  {
    format: 'buildah',
    lines: 24,
    notInfo: { 9: 'WARN', 24: 'ERROR' },
    steps: { 1: '1/7', 8: '2/7', 10: '3/7', 12: '4/7', 15: '5/7', 18: '6/7', 20: '7/7' },
  },
  {
    format: 'docker',
    lines: 36,
    notInfo: { 1: 'WARN', 26: 'WARN', 36: 'ERROR' },
    steps: { 6: '1/8', 11: '2/8', 15: '3/8', 19: '4/8', 21: '5/8', 29: '6/8', 31: '7/8' },
  },
  {
    format: 'pack',
    lines: 34,
    notInfo: { 4: 'WARN', 14: 'WARN', 33: 'ERROR', 34: 'ERROR' },
    steps: {
      ...span(5, 6, '1/5'),
      ...span(7, 12, '2/5'),
      ...span(13, 14, '3/5'),
      ...span(15, 33, '4/5'),
    },
  },
  {
    format: 'packer',
    lines: 37,
    notInfo: { 18: 'WARN', 24: 'ERROR', 33: 'ERROR' },
    steps: {},
  },
];

function levelsOf(insights: LineInsight[]): LogLevel[] {
  return insights.map((insight) => insight.level);
}

function stepsOf(insights: LineInsight[]): Record<number, string> {
  const out: Record<number, string> = {};
  insights.forEach((insight, index) => {
    if (insight.step) out[index + 1] = `${insight.step.current}/${insight.step.total}`;
  });
  return out;
}

describe(inspectLine.name, () => {
  describe('on the recorded sample outputs', () => {
    it.each(fixtures)('reads the levels of every line of $format.log', (fixture) => {
      const insights = fixtureLines(fixture.format).map((line) =>
        inspectLine(line, fixture.format),
      );
      const expected = Array.from(
        { length: fixture.lines },
        (_, index) => fixture.notInfo[index + 1] ?? 'INFO',
      );
      expect(levelsOf(insights)).toEqual(expected);
    });

    it.each(fixtures)('finds the steps of $format.log', (fixture) => {
      const insights = fixtureLines(fixture.format).map((line) =>
        inspectLine(line, fixture.format),
      );
      expect(stepsOf(insights)).toEqual(fixture.steps);
    });

    it.each(fixtures)('reads $format.log the same way without a format hint', (fixture) => {
      for (const line of fixtureLines(fixture.format)) {
        expect(inspectLine(line)).toEqual(inspectLine(line, fixture.format));
      }
    });
  });

  describe('kaniko', () => {
    it.each<[string, LogLevel]>([
      ['INFO[0003] Retrieving image manifest alpine:3.20', 'INFO'],
      ['WARN[0003] Error while retrieving image from cache: alpine:3.20', 'WARN'],
      ['ERRO[0003] Error while building image', 'ERROR'],
      ['FATA[0003] failed to get filesystem from image', 'ERROR'],
      ['PANI[0003] unexpected state', 'ERROR'],
      ['DEBU[0003] Skip resolving path /kaniko/Dockerfile', 'DEBUG'],
      ['TRAC[0003] Adding file /etc/passwd to layer', 'DEBUG'],
    ])('maps the logrus prefix of %j to %s', (line, level) => {
      expect(inspectLine(line, 'kaniko')).toEqual({ level, metadata: {} });
    });

    it('names the Dockerfile instruction it is executing without a step', () => {
      expect(inspectLine('INFO[0003] RUN echo hi', 'kaniko')).toEqual({
        level: 'INFO',
        metadata: { command: 'RUN' },
      });
    });

    it('names no instruction for messages that only mention one', () => {
      expect(
        inspectLine('INFO[0002] Unpacking rootfs as cmd COPY . . requires it.', 'kaniko'),
      ).toEqual({ level: 'INFO', metadata: {} });
      expect(inspectLine('INFO[0009] Cmd: /bin/sh', 'kaniko')).toEqual({
        level: 'INFO',
        metadata: {},
      });
    });

    it('reads the level through the colour codes of the default log format', () => {
      expect(inspectLine('\u001b[36mINFO\u001b[0m[0003] COPY . .', 'kaniko')).toEqual({
        level: 'INFO',
        metadata: { command: 'COPY' },
      });
      expect(
        inspectLine('\u001b[33mWARN\u001b[0m[0001] Error while retrieving', 'kaniko').level,
      ).toBe('WARN');
    });

    it('accepts a full timestamp inside the brackets', () => {
      expect(inspectLine('INFO[2024-05-14T09:12:03Z] WORKDIR /src', 'kaniko')).toEqual({
        level: 'INFO',
        metadata: { command: 'WORKDIR' },
      });
    });

    it('reads the logfmt lines of --log-format=text', () => {
      expect(
        inspectLine('time="2024-05-14T09:12:03Z" level=info msg="RUN go build ./..."', 'kaniko'),
      ).toEqual({ level: 'INFO', metadata: { command: 'RUN' } });
      expect(
        inspectLine('time="2024-05-14T09:12:09Z" level=error msg="Error pushing image"', 'kaniko'),
      ).toEqual({ level: 'ERROR', metadata: {} });
    });

    it('marks the bare error kaniko exits with as ERROR', () => {
      expect(
        inspectLine(
          'error building image: error building stage: failed to execute command: waiting for process to exit: exit status 1',
          'kaniko',
        ).level,
      ).toBe('ERROR');
      expect(
        inspectLine(
          'error checking push permissions -- make sure you entered the correct tag name',
          'kaniko',
        ).level,
      ).toBe('ERROR');
    });

    it('keeps RUN output that mentions errors at INFO', () => {
      expect(inspectLine('error handling improved', 'kaniko').level).toBe('INFO');
      expect(inspectLine('build finished: 0 errors, 2 warnings', 'kaniko').level).toBe('INFO');
    });
  });

  describe('buildkit', () => {
    it('reads the step, vertex and stage of a stage-prefixed vertex header', () => {
      expect(inspectLine('#7 [build 2/4] COPY . .', 'buildkit')).toEqual({
        level: 'INFO',
        step: { current: 2, total: 4 },
        metadata: { vertex: '7', stage: 'build', step: '2/4' },
      });
    });

    it('reads the step of a vertex header without a stage', () => {
      expect(inspectLine('#5 [3/12] RUN make', 'buildkit')).toEqual({
        level: 'INFO',
        step: { current: 3, total: 12 },
        metadata: { vertex: '5', step: '3/12' },
      });
    });

    it('reads an index padded to the width of the total', () => {
      expect(inspectLine('#6 [ 1/11] FROM docker.io/library/alpine:3.20', 'buildkit').step).toEqual(
        {
          current: 1,
          total: 11,
        },
      );
    });

    it('reads the platform of a multi-platform header', () => {
      expect(inspectLine('#12 [linux/arm64 build  2/10] RUN go build ./...', 'buildkit')).toEqual({
        level: 'INFO',
        step: { current: 2, total: 10 },
        metadata: { vertex: '12', platform: 'linux/arm64', stage: 'build', step: '2/10' },
      });
    });

    it('takes no step from an internal vertex', () => {
      expect(
        inspectLine('#2 [internal] load metadata for docker.io/library/node:20', 'buildkit'),
      ).toEqual({ level: 'INFO', metadata: { vertex: '2' } });
    });

    it('marks a failed vertex as ERROR', () => {
      expect(
        inspectLine(
          '#5 ERROR: process "/bin/sh -c make" did not complete successfully: exit code: 2',
          'buildkit',
        ),
      ).toEqual({ level: 'ERROR', metadata: { vertex: '5' } });
    });

    it.each([
      '#1 WARN: FromAsCasing: keywords casing do not match (line 1)',
      '#3 WARNING: image platform does not match the expected platform',
    ])('marks the vertex warning %j as WARN', (line) => {
      expect(inspectLine(line, 'buildkit').level).toBe('WARN');
    });

    it.each([
      '#5 DONE 0.1s',
      '#5 CACHED',
      '#5 CANCELED',
      '#5 ...',
      '#5 sha256:4abcf20661432fb2d719aaf90656f55c287f8ca915dc1c92ec14ff61e67fbaf8 3.41MB / 3.41MB 0.3s done',
    ])('reads the status line %j as INFO with its vertex', (line) => {
      expect(inspectLine(line, 'buildkit')).toEqual({ level: 'INFO', metadata: { vertex: '5' } });
    });

    it.each([
      '#9 0.532 this error message is expected',
      '#9 12.41 npm warn deprecated inflight@1.0.6',
      '#9 123.4 src/server.ts(14,7): error TS2322',
    ])('keeps the process output %j at INFO', (line) => {
      expect(inspectLine(line, 'buildkit')).toEqual({ level: 'INFO', metadata: { vertex: '9' } });
    });

    it('keeps a header whose command echoes a marker at INFO', () => {
      expect(inspectLine('#9 [3/5] RUN echo "ERROR: not really"', 'buildkit')).toEqual({
        level: 'INFO',
        step: { current: 3, total: 5 },
        metadata: { vertex: '9', step: '3/5' },
      });
    });

    it('raises process output that starts with an explicit marker', () => {
      expect(inspectLine('#9 0.104 ERROR: not really', 'buildkit').level).toBe('ERROR');
      expect(
        inspectLine("#9 4.210 WARNING: Running pip as the 'root' user", 'buildkit').level,
      ).toBe('WARN');
    });

    it('marks the top-level solve failure of buildctl and buildx as ERROR', () => {
      expect(inspectLine('error: failed to solve: process "/bin/sh -c make"', 'buildkit')).toEqual({
        level: 'ERROR',
        metadata: {},
      });
      expect(
        inspectLine('ERROR: failed to solve: process "/bin/sh -c make"', 'buildkit').level,
      ).toBe('ERROR');
    });

    it('marks a top-level warning as WARN', () => {
      expect(
        inspectLine('WARNING: No output specified with docker-container driver.', 'buildkit').level,
      ).toBe('WARN');
    });

    it('takes no step from the error summary that repeats a header', () => {
      expect(inspectLine(' > [build 5/5] RUN npm run build:', 'buildkit')).toEqual({
        level: 'INFO',
        metadata: {},
      });
    });
  });

  describe('buildah', () => {
    it('reads the step of a STEP line', () => {
      expect(inspectLine('STEP 3/12: RUN make', 'buildah')).toEqual({
        level: 'INFO',
        step: { current: 3, total: 12 },
        metadata: { step: '3/12' },
      });
    });

    it('reads the stage of a multi-stage build', () => {
      expect(inspectLine('[2/2] STEP 1/4: FROM gcr.io/distroless/static', 'buildah')).toEqual({
        level: 'INFO',
        step: { current: 1, total: 4 },
        metadata: { stage: '2/2', step: '1/4' },
      });
    });

    it.each([
      'Error: building at STEP "RUN make": while running runtime: exit status 2',
      'error building at STEP "RUN make": exit status 2',
    ])('marks the failure %j as ERROR', (line) => {
      expect(inspectLine(line, 'buildah')).toEqual({ level: 'ERROR', metadata: {} });
    });

    it('maps logrus prefixes', () => {
      expect(inspectLine('WARN[0000] Failed to decode the keys', 'buildah').level).toBe('WARN');
      expect(inspectLine('ERRO[0001] exit status 1', 'buildah').level).toBe('ERROR');
    });

    it.each<[string, LogLevel]>([
      ['warning', 'WARN'],
      ['error', 'ERROR'],
      ['fatal', 'ERROR'],
      ['info', 'INFO'],
      ['debug', 'DEBUG'],
    ])('maps the logfmt level=%s to %s', (name, level) => {
      expect(
        inspectLine(
          `time="2024-05-14T09:12:03Z" level=${name} msg="something happened"`,
          'buildah',
        ),
      ).toEqual({ level, metadata: {} });
    });

    it('marks the unused build argument notice as WARN', () => {
      expect(
        inspectLine('[Warning] one or more build args were not consumed: [GOFLAGS]', 'buildah')
          .level,
      ).toBe('WARN');
    });

    it('names no instruction, unlike kaniko', () => {
      expect(inspectLine('INFO[0003] RUN echo hi', 'buildah')).toEqual({
        level: 'INFO',
        metadata: {},
      });
    });
  });

  describe('docker', () => {
    it('reads the step of a Step line', () => {
      expect(inspectLine('Step 3/12 : RUN echo "ERROR: not really"', 'docker')).toEqual({
        level: 'INFO',
        step: { current: 3, total: 12 },
        metadata: { step: '3/12' },
      });
    });

    it('reads a layer line as INFO without a step', () => {
      expect(inspectLine(' ---> Running in 8d2f1c7e9a03', 'docker')).toEqual({
        level: 'INFO',
        metadata: {},
      });
    });

    it.each([
      "The command '/bin/sh -c make' returned a non-zero code: 2",
      "Error response from daemon: pull access denied for acme/base, repository does not exist or may require 'docker login'",
    ])('marks the failure %j as ERROR', (line) => {
      expect(inspectLine(line, 'docker').level).toBe('ERROR');
    });

    it.each([
      '[Warning] One or more build-args [NODE_ENV] were not consumed',
      'DEPRECATED: The legacy builder is deprecated and will be removed in a future release.',
    ])('marks the notice %j as WARN', (line) => {
      expect(inspectLine(line, 'docker').level).toBe('WARN');
    });
  });

  describe('pack', () => {
    it.each<[string, number]>([
      ['analyzer', 1],
      ['detector', 2],
      ['restorer', 3],
      ['builder', 4],
      ['exporter', 5],
    ])('numbers the %s phase %i of 5', (phase, current) => {
      expect(inspectLine(`[${phase}] some output`, 'pack')).toEqual({
        level: 'INFO',
        step: { current, total: 5 },
        metadata: { phase, step: `${current}/5` },
      });
    });

    it('names the extender phase without numbering it', () => {
      expect(inspectLine('[extender] Running build command', 'pack')).toEqual({
        level: 'INFO',
        metadata: { phase: 'extender' },
      });
    });

    it.each<[string, string, number]>([
      ['===> ANALYZING', 'analyzer', 1],
      ['===> DETECTING', 'detector', 2],
      ['===> RESTORING', 'restorer', 3],
      ['===> BUILDING', 'builder', 4],
      ['===> EXPORTING', 'exporter', 5],
    ])('reads the banner %j as the %s phase', (line, phase, current) => {
      expect(inspectLine(line, 'pack')).toEqual({
        level: 'INFO',
        step: { current, total: 5 },
        metadata: { phase, step: `${current}/5` },
      });
    });

    it('marks a lifecycle error inside a phase as ERROR', () => {
      expect(inspectLine('[builder] ERROR: failed to build: exit status 1', 'pack')).toEqual({
        level: 'ERROR',
        step: { current: 4, total: 5 },
        metadata: { phase: 'builder', step: '4/5' },
      });
    });

    it.each([
      '[exporter] Warning: the run image is not signed',
      '[builder] WARNING: BP_NODE_VERSION is ignored',
      'Warning: Builder is trusted but additional modules were added',
    ])('marks the warning %j as WARN', (line) => {
      expect(inspectLine(line, 'pack').level).toBe('WARN');
    });

    it('marks the final pack error as ERROR', () => {
      expect(
        inspectLine(
          'ERROR: failed to build: executing lifecycle: failed with status code: 51',
          'pack',
        ),
      ).toEqual({ level: 'ERROR', metadata: {} });
    });

    it('keeps indented buildpack output at INFO', () => {
      expect(inspectLine('[builder]       npm ERR! code EUSAGE', 'pack').level).toBe('INFO');
      expect(inspectLine('[builder]     ERROR: from a build script', 'pack').level).toBe('INFO');
    });

    it('reads no phase from other bracketed prefixes', () => {
      expect(inspectLine('[internal] load build context', 'pack')).toEqual({
        level: 'INFO',
        metadata: {},
      });
    });
  });

  describe('packer', () => {
    it('names the builder of a ==> line', () => {
      expect(
        inspectLine('==> docker: Creating a temporary directory for sharing data...', 'packer'),
      ).toEqual({ level: 'INFO', metadata: { builder: 'docker' } });
    });

    it('names the builder of indented provisioner output', () => {
      expect(inspectLine('    docker: Reading package lists...', 'packer')).toEqual({
        level: 'INFO',
        metadata: { builder: 'docker' },
      });
    });

    it('marks an Error message of a builder as ERROR', () => {
      expect(
        inspectLine(
          '==> docker: Error running container: Docker exited with a non-zero exit status.',
          'packer',
        ),
      ).toEqual({ level: 'ERROR', metadata: { builder: 'docker' } });
    });

    it('marks an errored build as ERROR', () => {
      expect(
        inspectLine("Build 'docker' errored after 3 seconds: Error pulling Docker image", 'packer'),
      ).toEqual({ level: 'ERROR', metadata: { builder: 'docker' } });
    });

    it('reads a finished build as INFO', () => {
      expect(inspectLine("Build 'docker' finished after 1 minute 2 seconds.", 'packer')).toEqual({
        level: 'INFO',
        metadata: { builder: 'docker' },
      });
    });

    it('marks the failed-builds summary as ERROR', () => {
      expect(
        inspectLine("==> Some builds didn't complete successfully and had errors:", 'packer'),
      ).toEqual({ level: 'ERROR', metadata: {} });
    });

    it('raises provisioner output only on an explicit marker', () => {
      expect(
        inspectLine('    docker: WARNING: apt does not have a stable CLI interface.', 'packer')
          .level,
      ).toBe('WARN');
      expect(inspectLine('    docker: error handling improved', 'packer').level).toBe('INFO');
    });

    it('reads lines prefixed by -timestamp-ui', () => {
      expect(
        inspectLine(
          '2024-05-14T09:12:03Z: ==> docker.ubuntu: Error pulling Docker image',
          'packer',
        ),
      ).toEqual({ level: 'ERROR', metadata: { builder: 'docker.ubuntu' } });
      expect(
        inspectLine(
          '2024-05-14T11:12:03+02:00:     docker.ubuntu: Reading package lists...',
          'packer',
        ),
      ).toEqual({ level: 'INFO', metadata: { builder: 'docker.ubuntu' } });
    });

    it('names the builder of an artifact line', () => {
      expect(
        inspectLine('--> docker: Imported Docker image: sha256:8c1d2e3f4a5b', 'packer'),
      ).toEqual({
        level: 'INFO',
        metadata: { builder: 'docker' },
      });
    });
  });

  describe('without a matching builder pattern', () => {
    it.each([
      'ERROR: something failed',
      'ERROR something failed',
      'Error: something failed',
      'error: something failed',
      'FATAL: out of memory',
      'fatal: not a git repository (or any of the parent directories): .git',
      'panic: runtime error: invalid memory address or nil pointer dereference',
    ])('marks %j as ERROR', (line) => {
      expect(inspectLine(line)).toEqual({ level: 'ERROR', metadata: {} });
    });

    it.each([
      'WARN something odd',
      'WARNING: something odd',
      'Warning: something odd',
      'warning: something odd',
      '[Warning] something odd',
    ])('marks %j as WARN', (line) => {
      expect(inspectLine(line)).toEqual({ level: 'WARN', metadata: {} });
    });

    it.each(['DEBUG resolved 3 hosts', 'TRACE entering loop'])('marks %j as DEBUG', (line) => {
      expect(inspectLine(line)).toEqual({ level: 'DEBUG', metadata: {} });
    });

    it.each([
      '',
      'error handling improved',
      'Errors: 0',
      'ERRORS: 0',
      '  ERROR: indented output',
      'the build reported no ERROR',
      'warnings were treated as errors',
      'npm WARN deprecated inflight@1.0.6',
      'npm ERR! code ELIFECYCLE',
      'E: Unable to locate package nginx-extras-light',
      '# comment mentioning #5 [3/12]',
    ])('keeps %j at INFO', (line) => {
      expect(inspectLine(line)).toEqual({ level: 'INFO', metadata: {} });
    });

    it('falls back to the markers when the named format has no pattern for the line', () => {
      expect(inspectLine('ERROR: failed to push', 'packer')).toEqual({
        level: 'ERROR',
        metadata: {},
      });
    });
  });

  describe('format hint', () => {
    it("tries only the named format's patterns", () => {
      expect(inspectLine('STEP 3/12: RUN make', 'docker')).toEqual({ level: 'INFO', metadata: {} });
      expect(inspectLine('Step 3/12 : RUN make', 'buildah')).toEqual({
        level: 'INFO',
        metadata: {},
      });
      expect(inspectLine('[builder] ERROR: failed', 'packer')).toEqual({
        level: 'INFO',
        metadata: {},
      });
    });

    it.each<[string, Partial<LineInsight>]>([
      ['#5 [3/12] RUN make', { step: { current: 3, total: 12 } }],
      ['STEP 3/12: RUN make', { step: { current: 3, total: 12 } }],
      ['Step 3/12 : RUN make', { step: { current: 3, total: 12 } }],
      ['INFO[0003] RUN make', { metadata: { command: 'RUN' } }],
      ['[detector] 3 of 7 buildpacks participating', { step: { current: 2, total: 5 } }],
      ['==> docker: Pulling Docker image: ubuntu', { metadata: { builder: 'docker' } }],
    ])('recognises %j without a hint', (line, expected) => {
      expect(inspectLine(line)).toMatchObject(expected);
    });
  });

  it('sets no step for an impossible count', () => {
    expect(inspectLine('Step 13/12 : RUN make', 'docker')).toEqual({ level: 'INFO', metadata: {} });
    expect(inspectLine('#5 [0/3] RUN make', 'buildkit')).toEqual({
      level: 'INFO',
      metadata: { vertex: '5' },
    });
  });

  it('returns fresh metadata on every call', () => {
    const first = inspectLine('#5 [3/12] RUN make');
    first.metadata.vertex = 'changed';
    expect(inspectLine('#5 [3/12] RUN make').metadata.vertex).toBe('5');
  });

  it('returns a known level and a step that agrees with metadata.step for any line', () => {
    const prefixes = [
      '',
      '#5 [',
      '#5 0.1 ',
      'STEP ',
      'Step ',
      '[builder] ',
      '===> ',
      '==> a: ',
      '    a: ',
      'INFO[',
      'level=',
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...prefixes),
        fc.string(),
        fc.constantFrom<BuilderFormat | undefined>(undefined, ...FORMATS),
        (prefix, rest, format) => {
          const insight = inspectLine(prefix + rest, format);
          expect(['DEBUG', 'INFO', 'WARN', 'ERROR']).toContain(insight.level);
          const step = insight.step ? `${insight.step.current}/${insight.step.total}` : undefined;
          expect(insight.metadata.step).toBe(step);
        },
      ),
    );
  });
});
