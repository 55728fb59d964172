import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseDocument, type Tags } from 'yaml';

// Renders Helm charts in jest specs with test/support/helm/main.go, a Go program built on Helm's
// own engine pieces (text/template + sprig) that prints what `helm template` prints: no helm
// binary is packaged for the test machines (not in Debian 12, not on npm), while Go and sprig are
// Debian packages (golang-1.19-go, golang-github-masterminds-sprig-dev,
// golang-gopkg-yaml.v3-dev) that build it offline in GOPATH mode. `make helm-lint` runs the real
// helm where it is installed.

const ROOT = join(__dirname, '..', '..', '..');
const SOURCE = join(__dirname, 'main.go');
const GO = '/usr/lib/go-1.19/bin/go';

/** What to render, in `helm template` terms. */
export interface RenderOptions {
  /** The chart directory. */
  chartDir: string;
  /** Values files, merged in order (`-f`). */
  valuesFiles?: string[];
  /** Values merged after the files, as one more values file would be (null deletes a key). */
  values?: unknown;
  /** `.Release.Name`; helm template's default is `release-name`. */
  releaseName?: string;
  /** `.Release.Namespace`; default `default`. */
  namespace?: string;
  /** Sets `.Release.IsUpgrade` instead of `.Release.IsInstall` (`--is-upgrade`). */
  upgrade?: boolean;
  /** `.Capabilities.KubeVersion`, e.g. `v1.32.0`; default Helm v3.21's `v1.36.0`. */
  kubeVersion?: string;
  /** API versions added to `.Capabilities.APIVersions` (`--api-versions`). */
  apiVersions?: string[];
  /** Prints the chart's crds/ files first (`--include-crds`). */
  includeCrds?: boolean;
}

/** One YAML document of the rendered stream. */
export interface RenderedDocument {
  /** The file it came from, as in helm's `# Source:` line: `<chart name>/templates/<file>`. */
  source: string;
  /** The document as printed, without the `---` and `# Source:` lines. */
  text: string;
  /** The document parsed the way Kubernetes reads YAML (YAML 1.1: `yes` is a boolean). */
  object: Record<string, unknown>;
}

export interface RenderedChart {
  /** The renderer's stdout: exactly the stream `helm template` prints. */
  stream: string;
  /** The stream's documents in order; documents holding only comments are left out. */
  documents: RenderedDocument[];
  /** The rendered templates/NOTES.txt, when the chart has one. */
  notes?: string;
}

let renderer: string | undefined;

/**
 * Builds the renderer once per content of main.go into `.cache/helm-render/render-<hash>` and
 * returns its path. Concurrent jest workers may build at once: each writes its own temporary file
 * and renames it into place, so a worker never runs a half-written binary.
 */
export function ensureRenderer(): string {
  if (renderer !== undefined && existsSync(renderer)) return renderer;
  const hash = createHash('sha256').update(readFileSync(SOURCE)).digest('hex').slice(0, 16);
  const dir = join(ROOT, '.cache', 'helm-render');
  const binary = join(dir, `render-${hash}`);
  if (!existsSync(binary)) {
    if (!existsSync(GO)) {
      throw new Error(`${GO} is missing: run scripts/system-deps.sh to install Go and sprig`);
    }
    mkdirSync(dir, { recursive: true });
    const temporary = `${binary}.${process.pid}.tmp`;
    const build = spawnSync(GO, ['build', '-o', temporary, '.'], {
      cwd: __dirname,
      encoding: 'utf8',
      env: {
        ...process.env,
        GO111MODULE: 'off',
        GOPATH: '/usr/share/gocode',
        GOCACHE: join(ROOT, '.cache', 'go'),
        GOFLAGS: '',
      },
    });
    if (build.error !== undefined || build.status !== 0) {
      rmSync(temporary, { force: true });
      throw new Error(`building the Helm renderer failed: ${build.error?.message ?? build.stderr}`);
    }
    renameSync(temporary, binary);
  }
  renderer = binary;
  return binary;
}

/** Renders a chart as `helm template` does; throws an Error carrying the renderer's stderr. */
export function renderChart(options: RenderOptions): RenderedChart {
  const stream = runRenderer(options, []);
  const documents = parseStream(stream);
  if (!existsSync(join(options.chartDir, 'templates', 'NOTES.txt'))) return { stream, documents };
  return { stream, documents, notes: renderNotes(options) };
}

/** Renders only the chart's templates/NOTES.txt (what `helm install` prints after installing). */
export function renderNotes(options: RenderOptions): string {
  return runRenderer(options, ['--notes']);
}

function runRenderer(options: RenderOptions, extra: string[]): string {
  const args = ['--chart', options.chartDir, ...extra];
  for (const file of options.valuesFiles ?? []) args.push('--values', file);
  if (options.values !== undefined) args.push('--set-json', JSON.stringify(options.values));
  if (options.releaseName !== undefined) args.push('--release-name', options.releaseName);
  if (options.namespace !== undefined) args.push('--namespace', options.namespace);
  if (options.upgrade === true) args.push('--upgrade');
  if (options.kubeVersion !== undefined) args.push('--kube-version', options.kubeVersion);
  if (options.apiVersions !== undefined && options.apiVersions.length > 0) {
    args.push('--api-versions', options.apiVersions.join(','));
  }
  if (options.includeCrds === true) args.push('--include-crds');
  const result = spawnSync(ensureRenderer(), args, {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.error !== undefined) throw result.error;
  if (result.status !== 0) {
    throw new Error(`rendering ${options.chartDir} failed: ${result.stderr.trim()}`);
  }
  return result.stdout;
}

// yaml.v2, which Kubernetes decodes manifests with, reads booleans the YAML 1.1 way but keeps
// timestamps and base-60 numbers (`8080:80`) as strings.
const kubernetesTags = (tags: Tags): Tags =>
  tags.filter(
    (tag) =>
      typeof tag === 'string' ||
      (tag.tag !== 'tag:yaml.org,2002:timestamp' && tag.format !== 'TIME'),
  );

/**
 * Splits helm's stream at its `---` + `# Source:` headers. A header's block normally holds one
 * document; a CRD file printed by --include-crds may hold several, separated by `---` lines.
 */
function parseStream(stream: string): RenderedDocument[] {
  const headers = [...stream.matchAll(/^---\n# Source: (.+)\n/gm)];
  return headers.flatMap((header, i) => {
    const source = header[1] ?? '';
    const block = stream.slice(header.index + header[0].length, headers[i + 1]?.index);
    return block.split(/^---[ \t]*$/m).flatMap((piece): RenderedDocument[] => {
      const text = piece.trim();
      const document = parseDocument(text, { version: '1.1', customTags: kubernetesTags });
      const [error] = document.errors;
      if (error !== undefined) throw new Error(`${source} is not valid YAML: ${error.message}`);
      const object: unknown = document.toJS();
      if (object === null || object === undefined) return [];
      if (typeof object !== 'object' || Array.isArray(object)) {
        throw new Error(`${source} rendered a document that is not a mapping:\n${text}`);
      }
      return [{ source, text, object: object as Record<string, unknown> }];
    });
  });
}
